"""The loader smoke test: stream a new version the way training will, before anyone is pointed at it.

It is a blocking check on the shard set, and the published pointer is an asset downstream of it, so
the pointer moves only when the check passes.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import shutil
from typing import Any

from dagster import (AssetCheckExecutionContext, AssetCheckKey, AssetCheckResult, AssetCheckSeverity,
                     AssetExecutionContext, AssetKey, MetadataValue, asset_check)

from pipelines.resources import ShardStore, SmokeTestSettings, SourceSettings

SMOKE_CHECK = "loader_smoke_test"


def smoke_test(remote: str, cache: str, version: int, rows_expected: int, settings: SmokeTestSettings) -> Any:
    """``mds_core``'s loader check on ``version``, with the settings training would use."""
    from mds_core.streaming.loader_check import check_loader  # imports torch

    return check_loader(remote=remote, local=cache, version=version, batch_size=settings.batch_size,
                        num_workers=settings.num_workers, samples_expected=rows_expected,
                        min_samples_per_second=settings.min_rows_per_second)


def report_metadata(report: Any) -> dict[str, Any]:
    """The check's figures as asset-check metadata, in rows (a sample is a table row here)."""
    return {"version": report.version, "rows_expected": report.samples_expected,
            "rows_streamed": report.samples_streamed, "distinct": report.distinct,
            "exactly_once": report.exactly_once, "resumed_at_sample": report.resumed_at_sample,
            "continuation_matches": report.continuation_matches,
            "rows_per_second": report.samples_per_second, "seconds": report.seconds,
            "problems": MetadataValue.json(report.problems), "num_workers": report.num_workers,
            "batch_size": report.batch_size, **telemetry_metadata(report.telemetry)}


def telemetry_metadata(metrics: dict[str, Any]) -> dict[str, Any]:
    """Where the smoke test's epoch spent its data time (``StreamingDataLoader.metrics()``)."""
    if not metrics:
        return {}
    totals = metrics["totals"]
    return {"wait_seconds": round(metrics["wait_seconds"], 4), "wait_max_seconds": round(metrics["wait_max_seconds"], 4),
            "decode_seconds": round(totals["decode_seconds"], 4), "bytes_downloaded": totals["bytes_downloaded"],
            "shards_downloaded": totals["shards_downloaded"], "cache_hits": totals["cache_hits"],
            "cache_misses": totals["cache_misses"], "telemetry": MetadataValue.json(metrics)}


def version_from_this_run(context: AssetCheckExecutionContext | AssetExecutionContext, asset: str) -> dict[str, Any]:
    """The metadata the shard-set asset recorded in this run (its version number, rows, URL)."""
    event = context.instance.get_latest_materialization_event(AssetKey(asset))
    if event is None or event.run_id != context.run.run_id or event.asset_materialization is None:
        raise RuntimeError(f"{asset} was not materialised in this run, so there is no new version to test")
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def smoke_test_passed_in_this_run(context: AssetExecutionContext) -> bool:
    """Whether this run's loader smoke test passed: publication must not happen without it, even in
    a run that selected the assets but not the check."""
    key = AssetCheckKey(AssetKey("shard_set"), SMOKE_CHECK)
    records = context.instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
    return any(record.run_id == context.run.run_id and _passed(record) for record in records)


def _passed(record: Any) -> bool:
    event = record.event.dagster_event if record.event is not None else None
    return bool(getattr(event.event_specific_data, "passed", False)) if event is not None else False


@asset_check(asset="shard_set", name=SMOKE_CHECK, blocking=True,
             description="Streams the new version with StreamingDataLoader (2 workers): every sample exactly "
                         "once, a mid-epoch resume continues the same order, throughput recorded. Blocks "
                         "publication when it fails.")
def loader_smoke_test(context: AssetCheckExecutionContext, shard_store: ShardStore,
                      smoke_settings: SmokeTestSettings, source: SourceSettings) -> AssetCheckResult:
    written = version_from_this_run(context, "shard_set")
    cache = shard_store.cache(f"{source.dataset}-smoke-{context.run.run_id[:8]}")
    try:
        report = smoke_test(written["store_url"], cache, int(written["version"]), int(written["rows"]), smoke_settings)
    finally:
        shutil.rmtree(cache, ignore_errors=True)  # a throwaway copy: training keeps its own cache
    context.log.info(f"smoke test of version {report.version}: {'passed' if report.passed else report.problems}")
    return AssetCheckResult(passed=report.passed, severity=AssetCheckSeverity.ERROR,
                            description="; ".join(report.problems) or None, metadata=report_metadata(report))
