"""Spark with Delta Lake and delta-rs read the same rows of each table version (``make test-delta-spark``).

The ``delta`` source reads through Spark (``versionAsOf``) where the session has Delta's extension, and through
delta-rs elsewhere (pipelines/delta_source.py). This compares the two on a real table with an append and a delete,
at every version and day. It needs Delta's jars, which Spark fetches from Maven (``spark.jars.packages``): no
Maven repository is reachable from the project's CI machines, so neither tier runs it (the ``delta_spark``
marker); run it on a machine that reaches Maven, or on Databricks, with ``make test-delta-spark``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mds_core.convert.delta import delta_batches, open_delta_table
from mds_core.convert.delta_changes import partition_predicate
from pipelines.delta_source import DeltaSnapshot, delta_frame, spark_reads_delta
from tests.pipelines.test_delta_source import DAY1, DAY2, digits_table

pytestmark = pytest.mark.delta_spark
deltalake = pytest.importorskip("deltalake")

# Delta 4.0 is built for Spark 4.0 and Scala 2.13; DELTA_SPARK_PACKAGE names another build.
PACKAGE = os.environ.get("DELTA_SPARK_PACKAGE", "io.delta:delta-spark_2.13:4.0.0")


@pytest.fixture(scope="module")
def delta_spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("delta-spark-parity")
        .config("spark.jars.packages", PACKAGE)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .getOrCreate()
    )
    yield session
    session.stop()


def test_spark_and_delta_rs_read_the_same_rows_at_every_version(delta_spark: Any, tmp_path: Path) -> None:
    table = digits_table(tmp_path / "table")  # version 0, an append (1) and a delete (2), partitioned by day
    assert spark_reads_delta(delta_spark)
    table_id = str(deltalake.DeltaTable(table).metadata().id)
    for version in range(3):
        snapshot = DeltaSnapshot(f"file://{table}", version, table_id)
        for day in (DAY1, DAY2):
            by_spark = delta_frame(delta_spark, snapshot, "day", day).where(f"day = '{day}'").toArrow()
            at_version = open_delta_table(table, version=version)
            by_delta_rs = delta_batches(at_version, None, partition_predicate([{"day": day}])).read_all()
            assert _rows(by_spark) == _rows(by_delta_rs), (version, day)
            assert _rows(by_spark), (version, day)  # every day of every version has rows to compare


def _rows(table: Any) -> list[tuple[Any, ...]]:
    """A table's rows as sorted tuples of plain values, in the column order of ``id, label, pixels, day``."""
    columns = [table.column(name).to_pylist() for name in ("id", "label", "pixels", "day")]
    return sorted(zip(*columns, strict=True))
