"""The pipelines' Spark session: the same local session as tests/spark (one per run, see tests/heavy.py); fresh folders per test."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from dagster import EnvVar, ExecuteInProcessResult

from mds_core import StreamingDataset
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


DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
DIGIT_COLUMNS = "id long, label int, pixels array<tinyint>"  # the digits schema's Spark types


def check(result: ExecuteInProcessResult, name: str) -> Any:
    """The run's one evaluation of the check ``name``."""
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def meta(entry: Any) -> dict[str, Any]:
    """An event's or an evaluation's metadata as plain values."""
    return {key: value.value for key, value in entry.metadata.items()}


def materialization(result: ExecuteInProcessResult, asset: str, dataset: str = "digits") -> Any:
    """The run's last materialization of ``dataset``'s ``asset``, which must be there."""
    events = result.asset_materializations_for_node(f"{dataset}__{asset}")
    assert events, f"{asset} was not materialised"
    return events[-1]


def only_failure(result: ExecuteInProcessResult) -> tuple[str | None, Any]:
    """The key and the error of the run's one failed step (a bad input is not retried)."""
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error is not None
    return failure.step_key, error


def shard_files(root: Path) -> dict[str, tuple[int, int]]:
    """The compressed shards the writer wrote under ``root``: each one's size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*.zstd")}


def stream_ids(resources: dict, version: int, cache: Path, dataset: str = "digits") -> list[int]:
    """The ids ``version`` of ``dataset``'s shard set streams, sorted."""
    url = resources["shard_store"].url(dataset)
    stream = StreamingDataset(remote=url, local=str(cache), version=version)
    return sorted(int(stream[i]["id"]) for i in range(len(stream)))


def write_rows(spark_session: Any, folder: Path, rows: list[tuple], schema: str = DIGIT_COLUMNS) -> None:
    """``rows`` as one Parquet file in ``folder``, as an upstream system lands a day."""
    spark_session.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(folder))


def write_landing_parquet(spark_session: Any, folder: Path, day: str, bad_label: int | None = None) -> None:
    """Five digit-shaped rows in ``folder/day``, optionally one with an impossible label and short pixels."""
    rows = [(i, i % 10, [i % 17] * 64) for i in range(5)]
    if bad_label is not None:
        rows.append((99, bad_label, [1, 2, 3]))
    write_rows(spark_session, folder / day, rows)
