"""Delta table sources (``source: {kind: delta, path: ...}``): one table version per run, read a day at a time.

A run resolves the table version once (the pinned one, else the latest) and reads every day at that version, so
the days of one run never mix versions. Where the Spark session has Delta Lake (``spark.sql.extensions`` names
``io.delta``), Spark reads the table with ``versionAsOf``; elsewhere delta-rs reads it (``open_delta_table``,
``delta_batches``, a partition predicate on the day column when it is a partition column) into Arrow, and the
driver hands the Arrow table to Spark: fine for the demo's scale, not for a large day (docs/delta.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mds_core.convert.delta import delta_batches, open_delta_table
from mds_core.convert.delta_changes import partition_predicate
from mds_core.errors import ConfigurationError, DeltaTableError
from mds_core.storage.unity_catalog import in_unity_catalog, resolve_location
from mds_core.storage.urls import redact

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.registry import Source


@dataclass(frozen=True)
class DeltaSnapshot:
    """The one table version a run reads.

    Attributes:
        table_uri: the table's storage location as delta-rs resolved it.
        version: the table version read.
        table_id: the table's id (stays the same across versions).
        uc_name: the Unity Catalog name it was named by (None for a path or URL).
        storage_options: the object store options to read it with (Unity Catalog's vended ones; None: environment).
    """

    table_uri: str
    version: int
    table_id: str
    uc_name: str | None = None
    storage_options: dict[str, str] | None = None

    def shown(self) -> dict[str, Any]:
        """The snapshot as metadata shows it: the URI without credentials, the UC name when there is one."""
        named = {"uc_name": self.uc_name} if self.uc_name else {}
        return {"table_uri": redact(self.table_uri.rstrip("/")), **named, "table_id": self.table_id}


def table_location(path: str) -> tuple[str, dict[str, str] | None, str | None]:
    """The storage location, object store options and Unity Catalog name of a ``delta`` source's ``path``.

    Args:
        path: the table's path or URL (``dbfs:/Volumes/...`` for a table kept in a volume), or its Unity Catalog
            name (``catalog.schema.table``).
    """
    if not path:
        raise ConfigurationError(
            "source kind 'delta' needs a table (the registry's source.path or the run config's `path`): "
            "a path, a URL or catalog.schema.table"
        )
    if in_unity_catalog(path):
        resolved = resolve_location(path)
        return resolved.storage_location, resolved.storage_options, resolved.uc_name
    return path, None, None


def resolve_snapshot(source: Source) -> DeltaSnapshot:
    """The table version ``source`` pins, else the latest: what every day of one run reads.

    Args:
        source: a ``delta`` source (``path`` and optional ``version``).
    """
    uri, options, uc_name = table_location(source.path)
    table = open_delta_table(uri, version=source.version, storage_options=options)
    return DeltaSnapshot(table.table_uri, table.version(), str(table.metadata().id), uc_name, options)


def spark_reads_delta(spark: SparkSession) -> bool:
    """Whether the session has Delta Lake's extension (then Spark reads the table itself)."""
    return "io.delta" in (spark.conf.get("spark.sql.extensions", "") or "")


def delta_frame(spark: SparkSession, snapshot: DeltaSnapshot, day_column: str, day: str) -> DataFrame:
    """The table's rows at the snapshot's version, narrowed to ``day`` where delta-rs can skip files by partition.

    The caller still filters on ``day_column`` (a non-partition day column is filtered only there).

    Args:
        spark: the session.
        snapshot: the table version to read.
        day_column: the column holding each row's day; empty: the whole table.
        day: the partition day (YYYY-MM-DD).
    """
    if spark_reads_delta(spark):  # untested here: the test session has no Delta jars
        reader = spark.read.format("delta").option("versionAsOf", snapshot.version)
        return reader.table(snapshot.uc_name) if snapshot.uc_name else reader.load(snapshot.table_uri)
    table = open_delta_table(snapshot.table_uri, version=snapshot.version, storage_options=snapshot.storage_options)
    names = [field.name for field in table.schema().fields]
    if day_column and day_column not in names:
        raise DeltaTableError(
            f"day_column {day_column!r} is not a column of {redact(snapshot.table_uri)} at version "
            f"{snapshot.version}; it has {names}"
        )
    by_partition = day_column and day_column in table.metadata().partition_columns
    predicate = partition_predicate([{day_column: day}]) if by_partition else None
    rows = delta_batches(table, None, predicate).read_all()
    # A day without rows is a table of no chunks, which Spark's Arrow conversion cannot type: give it one.
    return spark.createDataFrame(rows if rows.num_rows else rows.schema.empty_table())
