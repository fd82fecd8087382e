"""The loader smoke test: stream a new version the way training will, before anyone is pointed at it.

It is a blocking check on the shard set, and the published pointer is an asset downstream of it, so
the pointer moves only when the check passes.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from dagster import (AssetCheckExecutionContext, AssetCheckKey, AssetCheckResult, AssetCheckSeverity,
                     AssetExecutionContext, AssetKey, MetadataValue, asset_check)

from pipelines.resources import ShardStore, SmokeTestSettings, SourceSettings

SMOKE_CHECK = "loader_smoke_test"


@dataclass
class SmokeReport:
    version: int
    rows_expected: int
    rows_streamed: int = 0
    distinct: int = 0
    exactly_once: bool = False
    resumed_at_sample: int = 0
    continuation_matches: bool = False
    rows_per_second: float = 0.0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def smoke_test(remote: str, cache: str, version: int, rows_expected: int, settings: SmokeTestSettings) -> SmokeReport:
    """Stream ``version`` once through, then again stopping mid-epoch and resuming from the state dict."""
    report = SmokeReport(version=version, rows_expected=rows_expected)
    make = _loader_factory(remote, cache, version, settings)
    start = time.perf_counter()
    order = [sample_id for batch in make() for sample_id in _ids(batch)]
    report.seconds = time.perf_counter() - start
    report.rows_streamed, report.distinct = len(order), len(set(order))
    report.rows_per_second = len(order) / report.seconds if report.seconds else 0.0
    report.exactly_once = report.rows_streamed == report.distinct == rows_expected
    if not report.exactly_once:
        report.problems.append(f"streamed {report.rows_streamed} samples ({report.distinct} distinct), "
                               f"expected each of {rows_expected} exactly once")
    _check_resume(make, order, settings, report)
    if report.rows_per_second < settings.min_rows_per_second:
        report.problems.append(f"throughput {report.rows_per_second:.0f} rows/s is below the required "
                               f"{settings.min_rows_per_second:.0f} rows/s")
    return report


def _check_resume(make, order: list[int], settings: SmokeTestSettings, report: SmokeReport) -> None:
    """Stop halfway (in whole batches), resume in a fresh loader; the rest must be the uninterrupted rest."""
    stop_after = max(1, len(order) // settings.batch_size // 2)
    first, loader = [], make()
    for step, batch in enumerate(loader):
        first.extend(_ids(batch))
        if step + 1 == stop_after:
            break
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    rest = [sample_id for batch in resumed for sample_id in _ids(batch)]
    report.resumed_at_sample = int(state["sample_in_epoch"]) if state else 0
    report.continuation_matches = first + rest == order
    if not report.continuation_matches:
        report.problems.append(f"resuming at sample {report.resumed_at_sample} gave {len(rest)} samples that "
                               "differ from the uninterrupted epoch's remainder")


def _loader_factory(remote: str, cache: str, version: int, settings: SmokeTestSettings):
    """Loaders as training builds them (credentials and endpoints come from the environment, as there)."""
    from mds_core import StreamingDataLoader, StreamingDataset

    def make():
        dataset = StreamingDataset(remote=remote, local=cache, version=version, batch_size=settings.batch_size,
                                   shuffle=True)
        return StreamingDataLoader(dataset, batch_size=settings.batch_size, num_workers=settings.num_workers)

    return make


def _ids(batch: dict[str, Any]) -> list[int]:
    return [int(value) for value in batch["id"]]


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
    return AssetCheckResult(
        passed=report.passed, severity=AssetCheckSeverity.ERROR,
        description="; ".join(report.problems) or None,
        metadata={**{k: v for k, v in asdict(report).items() if k != "problems"},
                  "problems": MetadataValue.json(report.problems),
                  "num_workers": smoke_settings.num_workers, "batch_size": smoke_settings.batch_size})
