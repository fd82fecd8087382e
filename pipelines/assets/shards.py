"""The shard set: the validated rows written as MDS shards into a new version, not yet published.

Each day's rows are written as their own partition of the version (``ShardSet`` tracks which shards
hold which day), so a day can be replaced without touching the others. A version is built on the
last *published* version, never on one whose smoke test failed:

* ``auto`` (default): days the base does not hold are appended, days it holds are replaced;
* ``append``: refuses a day the base already holds (its rows would repeat);
* ``replace``: the base without the run's days, plus their new rows;
* ``overwrite``: only the run's days.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableMetadataValue,
    TableRecord,
    TableSchema,
    asset,
)
from pydantic import Field

from mds_core.errors import MDSError
from mds_core.storage.urls import redact
from pipelines.assets.delta_lineage import delta_source, table_link
from pipelines.assets.metadata import Materialized, standard_metadata
from pipelines.assets.raw import RawConfig, effective_source, shown_source
from pipelines.assets.run_family import RUN_ID
from pipelines.cluster import write_day
from pipelines.conventions import conventions, key, op_name
from pipelines.notices import dagster_features_we_pin
from pipelines.previews import sample_preview
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore, SparkResource, TableCatalog
from pipelines.retries import RETRY, failures_are_final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mds_core.versions import VersionInfo

PREVIEW_ROWS = 5
# dagster.yaml limits this pool to one run at a time, so two runs never race for a version number.
WRITER_POOL = "shard_set_writer"
Mode = Literal["auto", "append", "replace", "overwrite"]


class ShardsConfig(Config):
    """The run config of the shard set asset."""

    mode: Mode = Field(
        default="auto",
        description="auto: append new days, replace days already there; append; "
        "replace; overwrite (only this run's days).",
    )
    compression: str = Field(
        default="", description="Shard compression (zstd, zstd:7, gz, ... or none); empty: the dataset's."
    )
    size_limit: str = Field(default="", description="Largest raw shard, e.g. 1mb or 64mb; empty: the dataset's.")


def build_shard_set(spec: DatasetSpec) -> AssetsDefinition:
    """The ``shard_set`` asset for ``spec``."""
    settings = {"compression": spec.compression, "size_limit": spec.size_limit}
    with dagster_features_we_pin():

        @asset(
            name="shard_set",
            deps=[key(spec, "validated_table")],
            pool=WRITER_POOL,
            retry_policy=RETRY,
            **conventions(spec, "shards", {"spark", "mds"}, settings),
            description=f"{spec.name}: validated rows as MDS shards, committed as a new immutable version of "
            "the shard set on top of the published one (a day already there is replaced). "
            "Training reads the version published_version publishes, once the checks pass.",
        )
        def shard_set(
            context: AssetExecutionContext,
            config: ShardsConfig,
            spark: SparkResource,
            catalog: TableCatalog,
            shard_store: ShardStore,
        ) -> Materialized:
            with failures_are_final():
                return write_version(context, spec, config, spark, catalog, shard_store)

    return shard_set


def write_version(
    context: AssetExecutionContext,
    spec: DatasetSpec,
    config: ShardsConfig,
    spark: SparkResource,
    catalog: TableCatalog,
    shard_store: ShardStore,
) -> Materialized:
    """Convert the validated rows of the run's days into a new version of the shard set."""
    days = sorted(context.partition_keys)
    frame = catalog.read_days(spark.session(), f"{spec.name}_validated", days)
    counts = {row["day"]: row["count"] for row in frame.groupBy("day").count().collect()}
    written_days = [day for day in days if counts.get(day)]
    if not written_days:
        raise Failure(
            f"no validated rows for {', '.join(days)}: nothing to write, so no new version. See "
            "validated_table's counts (everything quarantined, or an empty source?).",
            allow_retries=False,
        )
    if len(written_days) < len(days):
        context.log.warning(f"no validated rows for {sorted(set(days) - set(written_days))}; they are left out")
    shards = shard_store.shard_set(spec.name)
    published = shards.published()
    base = shards.version(published) if published is not None else None
    mode = resolve_mode(config.mode, days_of(base), written_days, published)
    lineage = _lineage(context, spec, catalog, days_of(base), written_days, mode)
    lineage["source"] |= delta_source(context, spec, written_days, base, mode)
    mds_kwargs = {
        "compression": (config.compression or spec.compression) or None,
        "size_limit": config.size_limit or spec.size_limit,
    }
    # publish=False: the pointer moves in published_version, after the smoke test has passed.
    with shards.transaction(mode=mode, lineage=lineage, publish=False, base=published) as tx:
        results = [
            write_day(frame, day, spark.writer_tasks, {**mds_kwargs, "out": tx.partition_out(day)})
            for day in written_days
        ]
    info = tx.version
    assert info is not None  # leaving the with block without an error committed the version
    url = shard_store.url(spec.name)
    context.log.info(f"{spec.name}: committed version {info.number} ({mode} on {published}) at {redact(url)}")
    return MaterializeResult(
        metadata={
            **standard_metadata(info.rows, url, info.columns.items()),
            **version_metadata(info, mode, _stats(results), lineage),
            **table_link(lineage),
            "store_url": redact(url),
            "preview": preview(frame),
            **pictures(context, url, info.number, shard_store, spec),
        }
    )


def pictures(
    context: AssetExecutionContext, url: str, version: int, shard_store: ShardStore, spec: DatasetSpec
) -> dict[str, Any]:
    """The sample pictures; the version is committed by now, so a failure to draw them only logs."""
    try:
        return sample_preview(url, version, shard_store.options() or None, spec.pictures)
    except (MDSError, OSError, ValueError) as err:
        context.log.warning(f"{spec.name}: no sample pictures for version {version} ({err})")
        return {}


def days_of(version: "VersionInfo | None") -> set[str]:
    """The days a version holds: its partitions (each day is one; none without a version)."""
    return set(version.partitions) if version is not None else set()


def resolve_mode(requested: str, base_days: set[str], days: list[str], base: int | None) -> str:
    """The transaction's mode for ``requested`` (auto picks append or replace from the base's days)."""
    repeated = sorted(base_days & set(days))
    if requested == "append" and repeated:
        raise Failure(
            f"day(s) {', '.join(repeated)} are already in version {base}; appending them again would "
            "duplicate rows. Run with mode: replace (or auto) to replace them.",
            allow_retries=False,
        )
    if requested == "auto":
        return "replace" if repeated else "append"
    return requested


def _lineage(
    context: AssetExecutionContext,
    spec: DatasetSpec,
    catalog: TableCatalog,
    base_days: set[str],
    days: list[str],
    mode: str,
) -> dict[str, Any]:
    kept = set() if mode == "overwrite" else base_days
    return {
        "dataset": spec.name,
        "source": run_source(context, spec),
        "days": sorted(kept | set(days)),
        "added_days": days,
        "replaced_days": sorted(kept & set(days)),
        "mode": mode,
        RUN_ID: context.run.run_id,  # how publication finds the version its run wrote
        "validated_table": redact(catalog.location(f"{spec.name}_validated")),
    }


def run_source(context: AssetExecutionContext, spec: DatasetSpec) -> dict[str, Any]:
    """The source this run's raw_table read.

    The registry's, with the run config's overrides (a URL's credentials left out: the lineage is kept in the version's
    manifest, for everyone who reads it).
    """
    run_config: Mapping[str, Any] = context.run.run_config or {}  # dagster types its values as object
    ops = run_config.get("ops", {})
    config = ops.get(op_name(spec, "raw_table"), {}).get("config", {})
    return shown_source(effective_source(spec.source, RawConfig(**config)))


def version_metadata(info: "VersionInfo", mode: str, stats: dict[str, Any], lineage: dict[str, Any]) -> dict[str, Any]:
    """The new version's number, parent, mode, statistics and lineage, as asset metadata."""
    return {
        "version": info.number,
        "parent": info.parent if info.parent is not None else -1,
        "mode": mode,
        "rows": info.rows,
        "shards": info.shards,
        "bytes": info.stored_bytes,
        "raw_bytes": info.raw_bytes,
        "rows_added": stats["rows"],
        "shards_added": info.new_shards,
        "bytes_added": stats["compressed_bytes"],
        "raw_bytes_added": stats["raw_bytes"],
        "compression_ratio": round(stats["compression_ratio"], 3),
        "rows_per_second": round(stats["rows_per_second"], 1),
        "seconds": round(stats["seconds"], 2),
        "replaced_days": MetadataValue.json(lineage["replaced_days"]),
        "lineage": MetadataValue.json(info.lineage),
    }


def _stats(results: list[Any]) -> dict[str, Any]:
    """The converter's figures for the shards this run added, summed over its days."""
    stats = [result.stats.as_dict() for result in results]
    total = {name: sum(s[name] for s in stats) for name in ("rows", "raw_bytes", "compressed_bytes", "seconds")}
    total["compression_ratio"] = total["raw_bytes"] / total["compressed_bytes"] if total["compressed_bytes"] else 1.0
    total["rows_per_second"] = total["rows"] / total["seconds"] if total["seconds"] else 0.0
    return total


def preview(frame: "DataFrame") -> TableMetadataValue:
    """The first rows of ``frame`` as a Dagster table, every cell as text."""
    rows = [row.asDict() for row in frame.limit(PREVIEW_ROWS).collect()]
    columns = list(frame.columns)
    records = [TableRecord({c: _cell(row[c]) for c in columns}) for row in rows]
    schema = TableSchema(columns=[TableColumn(name, "string") for name in columns])
    return MetadataValue.table(records, schema=schema)


def _cell(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
