"""The loader smoke test: stream a new version the way training will, before anyone is pointed at it.

It is a blocking check on the shard set, and the published pointer is an asset downstream of it, so
the pointer moves only when the check passes. It reads the version's new shards in full and a
bounded, seeded sample of the older ones, so its cost does not grow with the history. Executed on
its own (the check's "Execute" button), it tests the shard set's latest version.
"""

# No `from __future__ import annotations`: Dagster reads the resource annotations at runtime.
import shutil
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from pipelines.assets.run_family import version_to_check
from pipelines.conventions import daily, key
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore, SmokeTestSettings

if TYPE_CHECKING:  # imported when the check runs: the loader check imports torch
    from mds_core.streaming.loader_check import LoaderCheckReport

SMOKE_CHECK = "loader_smoke_test"


def smoke_test(
    store: ShardStore, dataset: str, cache: str, version: int, settings: SmokeTestSettings
) -> "LoaderCheckReport":
    """``mds_core``'s bounded loader check of ``version``, with the settings training would use."""
    from mds_core.sizes import bytes_to_int
    from mds_core.streaming.loader_check import check_version  # imports torch

    return check_version(
        store.url(dataset),
        version,
        local=cache,
        storage_options=store.options() or None,
        sample_rows=settings.sample_rows,
        sample_seconds=settings.sample_seconds,
        cache_limit=bytes_to_int(settings.cache_limit) if settings.cache_limit else None,
        batch_size=settings.batch_size,
        num_workers=settings.num_workers,
        min_samples_per_second=settings.min_rows_per_second,
    )


def report_metadata(report: "LoaderCheckReport") -> dict[str, Any]:
    """The check's figures as asset-check metadata, in rows (a sample is a table row here)."""
    return {
        "version": report.version,
        "rows_expected": report.samples_expected,
        "rows_streamed": report.samples_streamed,
        "distinct": report.distinct,
        "exactly_once": report.exactly_once,
        "resumed_at_sample": report.resumed_at_sample,
        "continuation_matches": report.continuation_matches,
        "rows_per_second": round(report.samples_per_second, 1),
        "seconds": round(report.seconds, 3),
        "problems": MetadataValue.json(report.problems),
        # Settings, not measurements: text, so the UI does not plot a constant as a time series.
        "num_workers": MetadataValue.text(str(report.num_workers)),
        "batch_size": MetadataValue.text(str(report.batch_size)),
        **subset_metadata(report),
        **telemetry_metadata(report.telemetry),
    }


def subset_metadata(report: "LoaderCheckReport") -> dict[str, Any]:
    """Which part of the version was read: its new shards in full, and the sample of the older ones."""
    return {"checked": MetadataValue.json(report.subset)} if report.subset else {}


def telemetry_metadata(metrics: dict[str, Any]) -> dict[str, Any]:
    """Where the smoke test's epoch spent its data time (``StreamingDataLoader.metrics()``)."""
    if not metrics:
        return {}
    totals = metrics["totals"]
    return {
        "wait_seconds": round(metrics["wait_seconds"], 4),
        "wait_max_seconds": round(metrics["wait_max_seconds"], 4),
        "decode_seconds": round(totals["decode_seconds"], 4),
        "bytes_downloaded": totals["bytes_downloaded"],
        "shards_downloaded": totals["shards_downloaded"],
        "cache_hits": totals["cache_hits"],
        "cache_misses": totals["cache_misses"],
        "telemetry": MetadataValue.json(metrics),
    }


def build_smoke_check(spec: DatasetSpec) -> AssetChecksDefinition:
    """The shard set's smoke-test asset check for ``spec``."""
    with dagster_features_we_pin():

        @asset_check(
            asset=key(spec, "shard_set"),
            name=SMOKE_CHECK,
            blocking=True,
            partitions_def=daily(spec),
            description="Streams the new version with StreamingDataLoader (2 workers): its new shards "
            "and a bounded sample of the older ones, every sample exactly once, a mid-epoch "
            "resume that continues the same order, throughput recorded. Blocks publication "
            "when it fails; executed alone, it tests the latest version.",
        )
        def loader_smoke_test(
            context: AssetCheckExecutionContext, shard_store: ShardStore, smoke_settings: SmokeTestSettings
        ) -> AssetCheckResult:
            return run_smoke_test(context, spec, shard_store, smoke_settings)

    return loader_smoke_test


def run_smoke_test(
    context: AssetCheckExecutionContext, spec: DatasetSpec, store: ShardStore, settings: SmokeTestSettings
) -> AssetCheckResult:
    """Stream the version to check as training would; fail on any problem."""
    version = version_to_check(context, spec, store)
    if version is None:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=f"{spec.name} has no version yet: nothing to test",
        )
    cache = store.cache(f"{spec.name}-smoke-{context.run.run_id[:8]}")
    try:
        report = smoke_test(store, spec.name, cache, version, settings)
    finally:
        shutil.rmtree(cache, ignore_errors=True)  # a throwaway copy: training keeps its own cache
    context.log.info(f"smoke test of version {report.version}: {'passed' if report.passed else report.problems}")
    # Kept with the version, so publication reads the verdict from the shard set, not Dagster's event log.
    verdict = {"passed": report.passed, "run_id": context.run.run_id, "problems": report.problems}
    store.shard_set(spec.name).record_verdict(version, SMOKE_CHECK, verdict)
    return AssetCheckResult(
        passed=report.passed,
        severity=AssetCheckSeverity.ERROR,
        description="; ".join(report.problems) or None,
        metadata=report_metadata(report),
    )
