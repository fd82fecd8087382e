"""The pipelines' Spark session: the same local session as tests/spark (one per run, see tests/heavy.py); fresh folders per test."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from dagster import EnvVar

from pipelines.registry import DatasetSpec, Source
from pipelines.resources import (
    LandingZone,
    ShardStore,
    SmokeTestSettings,
    SparkResource,
    TableCatalog,
    TrainingWorldSettings,
)
from testsupport.spark_connect import SESSION_JVM_OPTIONS

# pyspark.pandas (imported by pandera.pyspark) warns about pandas and timezones on import.
warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
warnings.filterwarnings("ignore", category=UserWarning, module="pyspark")

# The same master and settings as tests/spark (two attempts per task): in one xdist worker, whichever fixture
# starts first creates the session the other gets. The JVM options are a deployment's setting, so they come
# as a deployment gives them: $MDS_SPARK_CONF, read through the EnvVar-bound field (run config may only tune).
SPARK_CONF = json.dumps({"spark.driver.extraJavaOptions": SESSION_JVM_OPTIONS})
SPARK = SparkResource(
    master="local[2,2]",
    spark_config={"spark.driver.memory": "1g", "spark.python.worker.reuse": "true"},
    spark_config_json=EnvVar("MDS_SPARK_CONF"),
)


@pytest.fixture(autouse=True)
def deployment_spark_conf(monkeypatch) -> None:
    """$MDS_SPARK_CONF as the deployment sets it, while a test of this folder runs (SPARK reads it in each run)."""
    monkeypatch.setenv("MDS_SPARK_CONF", SPARK_CONF)


@pytest.fixture(scope="session")
def spark_session(s3_server):
    """Started after the S3 test server, so the JVM and its Python workers inherit S3_ENDPOINT_URL."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MDS_SPARK_CONF", SPARK_CONF)
        session = SPARK.session()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def resources(tmp_path: Path, spark_session) -> dict:
    """The pipeline's resources, every folder inside this test's tmp_path."""
    return {
        "spark": SPARK,
        "catalog": TableCatalog(warehouse=str(tmp_path / "warehouse")),
        "shard_store": ShardStore(root=str(tmp_path / "shard-sets"), cache_dir=str(tmp_path / "cache")),
        "landing": LandingZone(path=str(tmp_path / "landing")),
        "smoke_settings": SmokeTestSettings(batch_size=8),
        "training_world": TrainingWorldSettings(world="2x2x2", batch_size=4),
    }


def digits(**source: Any) -> DatasetSpec:
    """The registry's embedded digits dataset at 60 rows a day, with any source field changed."""
    return DatasetSpec(name="digits", source=Source(**{"rows_per_day": 60, **source}), pictures={"pixels": (8, 8)})


@pytest.fixture
def spec() -> DatasetSpec:
    return digits()
