"""The raw table: one Spark table per dataset, partitioned by day, from the dataset's source."""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
from typing import TYPE_CHECKING, Any, Literal

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from mds_core.errors import MissingDependencyError
from mds_core.storage.urls import redact
from pipelines.assets.metadata import Materialized, standard_metadata
from pipelines.conventions import conventions
from pipelines.delta_source import DeltaSnapshot, delta_frame, resolve_snapshot
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec, Source
from pipelines.resources import SparkResource, TableCatalog
from pipelines.retries import RETRY, failures_are_final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FORMATS = ("parquet", "csv", "json", "delta")


class RawConfig(Config):
    """Per-run overrides of the dataset's source (empty or 0 keeps the registry's value)."""

    kind: Literal["", "digits", "synthetic", "table", "path", "delta"] = Field(default="", description="Source kind.")
    table: str = ""
    path: str = ""
    format: Literal["", "parquet", "csv", "json", "delta"] = ""
    day_column: str = ""
    rows_per_day: int = Field(default=0, ge=0)
    version: int | None = Field(default=None, ge=0, description="Delta table version to read (unset: the latest).")


def effective_source(source: Source, config: RawConfig) -> Source:
    """The dataset's source with the run's overrides: what this run actually reads (and its lineage records)."""
    # A pinned version 0 is an override too: only None keeps the registry's.
    overrides = {k: v for k, v in config.model_dump().items() if v or (k == "version" and v is not None)}
    return source.model_copy(update=overrides)


def shown_source(source: Source) -> dict[str, Any]:
    """The source as metadata and lineage show it: its path without the credentials a URL may carry."""
    # exclude_none: an unpinned version is left out, so other sources' lineage is as it was before Delta.
    return {**source.model_dump(exclude_none=True), "path": redact(source.path)}


def build_raw_table(spec: DatasetSpec) -> AssetsDefinition:
    """The ``raw_table`` asset for ``spec``."""
    with dagster_features_we_pin():

        @asset(
            name="raw_table",
            retry_policy=RETRY,
            **conventions(
                spec,
                "raw",
                {"spark", "parquet"},
                {"source": spec.source.model_dump(exclude_none=True), "start_date": spec.start_date},
            ),
            description=f"{spec.name}: the source's rows for each day, as a Parquet-backed Spark table.",
        )
        def raw_table(
            context: AssetExecutionContext, config: RawConfig, spark: SparkResource, catalog: TableCatalog
        ) -> Materialized:
            with failures_are_final():
                return write_raw(context, spec, effective_source(spec.source, config), spark, catalog)

    return raw_table


def write_raw(
    context: AssetExecutionContext, spec: DatasetSpec, source: Source, spark: SparkResource, catalog: TableCatalog
) -> Materialized:
    """Read the source for each partition day and write the days to the raw table."""
    session = spark.session()
    snapshot = resolve_snapshot(source) if source.kind == "delta" else None
    if snapshot is not None:  # every day of the run reads this one version, the latest when none is pinned
        source = source.model_copy(update={"version": snapshot.version})
    frames = [read_day(session, spec, source, day, snapshot) for day in context.partition_keys]
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    table = f"{spec.name}_raw"
    catalog.write_days(frame, table, context.partition_keys)
    counts = {row["day"]: row["count"] for row in frame.groupBy("day").count().collect()}
    context.log.info(f"{table}: {sum(counts.values())} rows for {len(context.partition_keys)} day(s)")
    return MaterializeResult(
        metadata={
            **standard_metadata(sum(counts.values()), catalog.location(table), frame.dtypes),
            "rows": sum(counts.values()),
            "rows_per_day": MetadataValue.json(counts),
            "source": describe_source(source),
            "effective_source": MetadataValue.json(shown_source(source)),
            "table": table,
            "location": MetadataValue.path(redact(catalog.location(table))),
            **delta_metadata(snapshot),
        },
        data_version=DataVersion(f"{snapshot.table_id}@{snapshot.version}") if snapshot else None,
    )


def delta_metadata(snapshot: DeltaSnapshot | None) -> dict[str, Any]:
    """The Delta table and version a run read (``table_uri`` redacted, ``uc_name``, ``table_id``, ``table_version``)."""
    return {**snapshot.shown(), "table_version": snapshot.version} if snapshot else {}


def describe_source(settings: Source) -> str:
    """The source in words, a URL's credentials left out."""
    if settings.kind == "table":
        return f"table {settings.table}"
    if settings.kind == "path":
        return f"{source_format(settings)} files at {redact(settings.path)}"
    if settings.kind == "delta":
        at = f" at version {settings.version}" if settings.version is not None else ""
        return f"Delta table {redact(settings.path)}{at}"
    return f"{settings.kind} ({settings.rows_per_day} rows/day)"


def read_day(
    spark: "SparkSession", spec: DatasetSpec, settings: Source, day: str, snapshot: DeltaSnapshot | None = None
) -> "DataFrame":
    """The source's rows for one day, with a ``day`` column holding the partition key.

    Args:
        spark: the session.
        spec: the dataset.
        settings: its source, with the run's overrides.
        day: the partition day (YYYY-MM-DD).
        snapshot: for a ``delta`` source, the table version the run reads (None: the source's, resolved here).
    """
    from pyspark.sql import functions as F

    readers = {"digits": digits_day, "synthetic": synthetic_day}
    if settings.kind in readers:
        return readers[settings.kind](spark, day, spec.day_index(day) * settings.rows_per_day, settings.rows_per_day)
    if settings.kind not in ("table", "path", "delta"):
        raise ValueError(f"unknown source kind {settings.kind!r}; use digits, synthetic, table, path or delta")
    if settings.kind == "delta":
        frame = delta_frame(spark, snapshot or resolve_snapshot(settings), settings.day_column, day)
    else:
        frame = external_source(spark, settings)
    if settings.day_column:
        if settings.day_column not in frame.columns:
            raise ValueError(f"day_column {settings.day_column!r} is not in the source; it has {frame.columns}")
        frame = frame.where(F.date_format(F.col(settings.day_column), "yyyy-MM-dd") == day)
    return frame.withColumn("day", F.lit(day))


def external_source(spark: "SparkSession", settings: Source) -> "DataFrame":
    """The source outside the landing zone (a table or files) as a DataFrame."""
    if settings.kind == "table":
        if not settings.table:
            raise ValueError(
                "source kind 'table' needs a table name (the registry's source.table or the run config's `table`)"
            )
        return spark.table(settings.table)
    if not settings.path:
        raise ValueError("source kind 'path' needs a path (the registry's source.path or the run config's `path`)")
    fmt = source_format(settings)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(settings.path)


def source_format(settings: Source) -> str:
    """The source files' format: the one set, else the path's extension, else parquet."""
    fmt: str = settings.format or next((f for f in FORMATS if settings.path.rstrip("/").endswith(f".{f}")), "parquet")
    if fmt not in FORMATS:
        raise ValueError(f"source format {fmt!r} is not one of {FORMATS}")
    return fmt


def digits_day(spark: "SparkSession", day: str, first: int, rows: int) -> "DataFrame":
    """A day's slice of scikit-learn's 1,797 handwritten digits (8x8 pixels, 0-16), cycling through them.

    Ids are global (``first`` = day index x rows, plus the row), so every day adds new samples.
    """
    try:
        from sklearn.datasets import load_digits
    except ModuleNotFoundError:  # a code server installs the `dagster` extra, without the demo's data
        raise MissingDependencyError(
            "the digits source reads scikit-learn's embedded digits: pip install 'mds-pipelines[demo]'"
        ) from None
    digits = load_digits()
    picks = [(first + j) % len(digits.target) for j in range(rows)]
    records = [
        (first + j, int(digits.target[i]), [int(v) for v in digits.images[i].ravel()], day) for j, i in enumerate(picks)
    ]
    return spark.createDataFrame(records, schema=_digits_struct())


def synthetic_day(spark: "SparkSession", day: str, first: int, rows: int) -> "DataFrame":
    """Any number of digit-shaped rows per day, generated by the executors (nothing on the driver)."""
    from pyspark.sql import functions as F

    return spark.range(first, first + rows).select(
        F.col("id"),
        F.expr("cast(pmod(hash(id), 10) as int)").alias("label"),
        F.expr("transform(sequence(0, 63), i -> cast(pmod(hash(id, i), 17) as tinyint))").alias("pixels"),
        F.lit(day).alias("day"),
    )


def _digits_struct() -> "StructType":
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("label", T.IntegerType(), False),
            T.StructField("pixels", T.ArrayType(T.ByteType(), False), False),
            T.StructField("day", T.StringType(), False),
        ]
    )
