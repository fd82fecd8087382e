"""A Spark standalone cluster (a master and two workers on 127.0.0.1) for the session, and its drivers.

The cluster's processes are started once per run by ``spark_cluster`` and stopped at its end: every test
here runs on the same xdist worker (``tests/heavy.py``). Each application's driver
is its own process (``tests/cluster/driver.py``): the suite's other Spark tests hold a ``local[...]``
SparkContext in the worker processes, and a process has one.

The applications ship ``mds_core`` as a zip in ``spark.submit.pyFiles`` to executors whose Python
(``spark.pyspark.python``) does not have it, and give the executors the S3 endpoint and credentials
through ``spark.executorEnv.*``: the workers' own environment has neither.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the cluster tests need the 'spark' extra")

from testsupport.spark_cluster import StandaloneCluster, executor_python, package_zip

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("cluster")
    started = time.perf_counter()
    cluster = StandaloneCluster(root, workers=2, cores=1, memory="1g", hidden=root / "driver-only")
    print(f"spark_cluster: {cluster.master_url} with 2 workers up in {time.perf_counter() - started:.1f} s")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_conf(spark_cluster: StandaloneCluster, s3_server, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Spark settings of a driver application on the test cluster."""
    from testsupport.s3 import s3_env

    root = tmp_path_factory.mktemp("cluster-app")
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "768m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(root / "driver-local"),
        "spark.pyspark.python": executor_python(root),
        "spark.pyspark.driver.python": sys.executable,
        "spark.submit.pyFiles": package_zip(root),
        "spark.python.worker.reuse": "true",
    }
    conf.update({f"spark.executorEnv.{key}": value for key, value in s3_env(s3_server.endpoint).items()})
    return conf


def run_driver(spec: dict[str, Any], env: dict[str, str] | None = None, timeout: float = 300) -> dict[str, Any]:
    """Run one scenario of tests/cluster/driver.py in its own process; its RESULT line, parsed."""
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    full_env.pop("PYSPARK_PYTHON", None)
    if "spark.pyspark.python" in spec.get("conf", {}):
        # A session built from Python (not spark-submit) takes the executors' Python from PYSPARK_PYTHON
        # only. The pipelines' Spark resource copies spark.pyspark.python there itself (scenario pipeline).
        full_env["PYSPARK_PYTHON"] = spec["conf"]["spark.pyspark.python"]
    command = [sys.executable, "-m", "tests.cluster.driver", json.dumps(spec)]
    proc = subprocess.run(command, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        pytest.fail(f"driver {spec['scenario']} exited {proc.returncode}:\n{proc.stderr[-6000:]}")
    report = json.loads(lines[-1][len("RESULT ") :])
    if "crashed" in report:
        pytest.fail(f"driver {spec['scenario']} failed:\n{report['crashed']}\n{proc.stderr[-3000:]}")
    return report
