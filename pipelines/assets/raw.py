"""The raw table: one Spark table per dataset, partitioned by day, from the configured source."""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
from typing import TYPE_CHECKING

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from pipelines.partitions import DAILY, GROUP, ONE_RUN, day_index
from pipelines.resources import SourceSettings, SparkResource, TableCatalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("parquet", "csv", "json", "delta")


class RawConfig(Config):
    """Per-run overrides of the deployment's source (empty or 0 keeps the default)."""

    kind: str = Field(default="", description="digits | synthetic | table | path")
    table: str = ""
    path: str = ""
    format: str = ""
    day_column: str = ""
    rows_per_day: int = 0


def effective_source(settings: SourceSettings, config: RawConfig) -> SourceSettings:
    overrides = {key: value for key, value in config.model_dump().items() if value}
    return settings.model_copy(update=overrides)


@asset(group_name=GROUP, partitions_def=DAILY, backfill_policy=ONE_RUN,
       description="The source's rows for each day, as a Parquet-backed Spark table in the local catalog.")
def raw_table(context: AssetExecutionContext, config: RawConfig, spark: SparkResource,
              catalog: TableCatalog, source: SourceSettings) -> MaterializeResult:
    settings = effective_source(source, config)
    session = spark.session()
    frames = [read_day(session, settings, day) for day in context.partition_keys]
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    table = f"{settings.dataset}_raw"
    catalog.write_days(frame, table, context.partition_keys)
    counts = {row["day"]: row["count"] for row in frame.groupBy("day").count().collect()}
    context.log.info(f"{table}: {sum(counts.values())} rows for {len(context.partition_keys)} day(s)")
    return MaterializeResult(metadata={
        "rows": sum(counts.values()),
        "rows_per_day": MetadataValue.json(counts),
        "source": describe_source(settings),
        "table": table,
        "location": MetadataValue.path(catalog.location(table)),
        "columns": MetadataValue.md(", ".join(f"`{n}` {t}" for n, t in frame.dtypes)),
    })


def describe_source(settings: SourceSettings) -> str:
    if settings.kind == "table":
        return f"table {settings.table}"
    if settings.kind == "path":
        return f"{source_format(settings)} files at {settings.path}"
    return f"{settings.kind} ({settings.rows_per_day} rows/day)"


def read_day(spark: "SparkSession", settings: SourceSettings, day: str) -> "DataFrame":
    """The source's rows for one day, with a ``day`` column holding the partition key."""
    from pyspark.sql import functions as F

    readers = {"digits": digits_day, "synthetic": synthetic_day}
    if settings.kind in readers:
        return readers[settings.kind](spark, day, settings.rows_per_day)
    if settings.kind not in ("table", "path"):
        raise ValueError(f"unknown source kind {settings.kind!r}; use digits, synthetic, table or path")
    frame = external_source(spark, settings)
    if settings.day_column:
        if settings.day_column not in frame.columns:
            raise ValueError(f"day_column {settings.day_column!r} is not in the source; it has {frame.columns}")
        frame = frame.where(F.date_format(F.col(settings.day_column), "yyyy-MM-dd") == day)
    return frame.withColumn("day", F.lit(day))


def external_source(spark: "SparkSession", settings: SourceSettings) -> "DataFrame":
    if settings.kind == "table":
        if not settings.table:
            raise ValueError("source kind 'table' needs a table name (config `table` or $MDS_SOURCE_TABLE)")
        return spark.table(settings.table)
    if not settings.path:
        raise ValueError("source kind 'path' needs a path (config `path` or $MDS_SOURCE_PATH)")
    fmt = source_format(settings)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(settings.path)


def source_format(settings: SourceSettings) -> str:
    fmt = settings.format or next((f for f in FORMATS if settings.path.rstrip("/").endswith(f".{f}")), "parquet")
    if fmt not in FORMATS:
        raise ValueError(f"source format {fmt!r} is not one of {FORMATS}")
    return fmt


def digits_day(spark: "SparkSession", day: str, rows: int) -> "DataFrame":
    """A day's slice of scikit-learn's 1,797 handwritten digits (8x8 pixels, 0-16), cycling through them.

    Ids are global (day index x rows + row), so every day adds new samples.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    first = day_index(day) * rows
    picks = [(first + j) % len(digits.target) for j in range(rows)]
    records = [(first + j, int(digits.target[i]), [int(v) for v in digits.images[i].ravel()], day)
               for j, i in enumerate(picks)]
    return spark.createDataFrame(records, schema=_digits_struct())


def synthetic_day(spark: "SparkSession", day: str, rows: int) -> "DataFrame":
    """Any number of digit-shaped rows per day, generated by the executors (nothing on the driver)."""
    from pyspark.sql import functions as F

    first = day_index(day) * rows
    return (spark.range(first, first + rows)
            .select(F.col("id"),
                    F.expr("cast(pmod(hash(id), 10) as int)").alias("label"),
                    F.expr("transform(sequence(0, 63), i -> cast(pmod(hash(id, i), 17) as tinyint))").alias("pixels"),
                    F.lit(day).alias("day")))


def _digits_struct():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("label", T.IntegerType(), False),
        T.StructField("pixels", T.ArrayType(T.ByteType(), False), False),
        T.StructField("day", T.StringType(), False),
    ])
