"""The shard set: the validated rows written as MDS shards into a new version, and its publication.

A day's run appends (the new version is the previous version's shards plus the day's); a run with
``full_refresh`` overwrites (the new version holds only the rows of the run's days). Publication is
a separate asset downstream of the blocking loader smoke test, so it moves only when the test passes.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import json
from typing import TYPE_CHECKING, Any

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, TableRecord, asset
from dagster import TableColumn, TableMetadataValue, TableSchema
from pydantic import Field

from pipelines.assets.smoke import SMOKE_CHECK, smoke_test_passed_in_this_run, version_from_this_run
from pipelines.assets.validated import validated_table
from pipelines.cluster import writer_partitions
from pipelines.partitions import DAILY, GROUP, ONE_RUN
from pipelines.resources import ShardStore, SourceSettings, SparkResource, TableCatalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PREVIEW_ROWS = 5
# dagster.yaml limits this pool to one run at a time, so appends never race for a version number.
WRITER_POOL = "shard_set_writer"


class ShardsConfig(Config):
    full_refresh: bool = Field(default=False, description="Overwrite: the new version holds only this run's days.")
    compression: str = Field(default="zstd", description="Shard compression (zstd, zstd:7, gz, ... or empty).")
    size_limit: str = Field(default="1mb", description="Largest raw shard, e.g. 1mb or 64mb.")


@asset(group_name=GROUP, partitions_def=DAILY, backfill_policy=ONE_RUN, deps=[validated_table], pool=WRITER_POOL,
       description="Validated rows as MDS shards, committed as a new immutable version of the shard set "
                   "(append for a new day, overwrite for a full refresh). Not yet published.")
def shard_set(context: AssetExecutionContext, config: ShardsConfig, spark: SparkResource,
              catalog: TableCatalog, shard_store: ShardStore, source: SourceSettings) -> MaterializeResult:
    from mds_core.convert.spark import dataframe_to_mds

    days = sorted(context.partition_keys)
    # Sorted by day and id in exactly spark.writer_tasks range partitions (default: the cluster's cores).
    frame = writer_partitions(catalog.read_days(spark.session(), f"{source.dataset}_validated", days),
                              spark.writer_tasks, "day", "id")
    if frame.isEmpty():
        raise ValueError(f"no validated rows for {', '.join(days)}: nothing to write, so no new version. "
                         f"See validated_table's counts (everything quarantined, or an empty source?).")
    shards = shard_store.shard_set(source.dataset)
    latest = shards.latest()
    mode = "overwrite" if config.full_refresh or latest is None else "append"
    if mode == "append":
        _refuse_repeated_days(latest, days)
    lineage = _lineage(context, source, catalog, days, latest if mode == "append" else None, mode)
    mds_kwargs: dict[str, Any] = {"compression": config.compression or None, "size_limit": config.size_limit}
    # publish=False: the pointer moves in published_version, after the smoke test has passed.
    with shards.transaction(mode=mode, lineage=lineage, publish=False) as tx:
        result = dataframe_to_mds(frame, merge_index=True, mds_kwargs={**mds_kwargs, "out": tx.out})
    info = tx.version
    stats = _stats(result)
    context.log.info(f"{source.dataset}: committed version {info.number} ({mode}) at {shards_url(shard_store, source)}")
    return MaterializeResult(metadata={
        "version": info.number, "parent": info.parent if info.parent is not None else -1, "mode": mode,
        "rows": info.rows, "shards": info.shards, "bytes": info.stored_bytes, "raw_bytes": info.raw_bytes,
        "rows_added": stats["rows"], "shards_added": info.new_shards,
        "bytes_added": stats["compressed_bytes"], "raw_bytes_added": stats["raw_bytes"],
        "compression_ratio": round(stats["compression_ratio"], 3),
        "rows_per_second": round(stats["rows_per_second"], 1), "seconds": round(stats["seconds"], 2),
        "store_url": shards_url(shard_store, source),
        "lineage": MetadataValue.json(info.lineage),
        "preview": preview(frame),
    })


def shards_url(shard_store: ShardStore, source: SourceSettings) -> str:
    return shard_store.url(source.dataset)


def _refuse_repeated_days(latest: Any, days: list[str]) -> None:
    repeated = sorted(set(days) & set((latest.lineage or {}).get("days", [])))
    if repeated:
        raise ValueError(f"day(s) {', '.join(repeated)} are already in version {latest.number}; appending them "
                         "again would duplicate rows. Run with config full_refresh: true to rebuild instead.")


def _lineage(context: AssetExecutionContext, source: SourceSettings, catalog: TableCatalog, days: list[str],
             parent: Any, mode: str) -> dict[str, Any]:
    earlier = list((parent.lineage or {}).get("days", [])) if parent is not None else []
    return {"dataset": source.dataset, "source_kind": source.kind, "days": sorted(set(earlier) | set(days)),
            "added_days": days, "mode": mode, "dagster_run_id": context.run.run_id,
            "validated_table": catalog.location(f"{source.dataset}_validated")}


def _stats(result: Any) -> dict[str, Any]:
    """The converter's figures for the shards this run added (``dataframe_to_mds(...).stats``)."""
    stats = result.stats.as_dict()
    stats["compression_ratio"] = stats["raw_bytes"] / stats["compressed_bytes"] if stats["compressed_bytes"] else 1.0
    return stats


def preview(frame: "DataFrame") -> TableMetadataValue:
    rows = [row.asDict() for row in frame.limit(PREVIEW_ROWS).collect()]
    columns = list(frame.columns)
    records = [TableRecord({c: _cell(row[c]) for c in columns}) for row in rows]
    schema = TableSchema(columns=[TableColumn(name, "string") for name in columns])
    return MetadataValue.table(records, schema=schema)


def _cell(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


@asset(group_name=GROUP, partitions_def=DAILY, backfill_policy=ONE_RUN, deps=[shard_set], pool=WRITER_POOL,
       description="Moves the shard set's published pointer (the root index.json training code reads) to "
                   f"the version this run wrote. Runs only after the blocking {SMOKE_CHECK} check passed.")
def published_version(context: AssetExecutionContext, shard_store: ShardStore,
                      source: SourceSettings) -> MaterializeResult:
    written = version_from_this_run(context, "shard_set")
    if not smoke_test_passed_in_this_run(context):
        raise RuntimeError(f"version {written['version']} was not published: the {SMOKE_CHECK} check did not pass "
                           "in this run. Run it with the shard set (the UI's 'Materialize all' and the "
                           "daily_conversion job include it).")
    shards = shard_store.shard_set(source.dataset)
    before = shards.published()
    shards.publish(int(written["version"]))
    url = shards_url(shard_store, source)
    return MaterializeResult(metadata={
        "published": int(written["version"]), "previously_published": before if before is not None else -1,
        "store_url": url,
        "read_it": MetadataValue.md(f"```python\nStreamingDataset(remote={url!r}, local='/tmp/cache', "
                                    f"version={int(written['version'])})\n```"),
    })
