"""One real local SparkSession per test session (per xdist worker).

``local[2,2]``: two cores and up to two attempts per task, so a task that fails once is retried
as it would be on a cluster. The S3 test server, when the suite provides it, is started first so the
JVM and its Python workers inherit its environment (``S3_ENDPOINT_URL`` and credentials).
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pyspark", reason="the Spark tests need the 'spark' extra")


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    try:
        request.getfixturevalue("s3_server")
    except pytest.FixtureLookupError:
        pass  # no S3 server in this suite: the S3 test is not collected either
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("mds-core-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.local.dir", str(root / "local"))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
