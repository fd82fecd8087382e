"""`make demo`: materialise the digits dataset's whole graph on the embedded digits, twice, and show what came out.

1. two days as one run (like a backfill) commit and publish a version, replacing whatever those
   days held before;
2. the next day appends a version holding the published shards plus that day's.

Runs are recorded in ``$DAGSTER_HOME`` (``make ui`` shows them). Environment variables such as
``MDS_SHARD_STORE=s3://bucket/prefix`` point the demo elsewhere (docs/pipelines.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, ExecuteInProcessResult

from mds_core.storage.urls import redact
from pipelines.assets.plan import PLAN_CHECK
from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.conventions import daily
from pipelines.instance import notes
from pipelines.paths import data_dir
from pipelines.registry import load_registry
from pipelines.resources import ShardStore, default_resources
from pipelines.runs import materialize_days

# The full event log is in the UI (`make ui`); the terminal gets warnings and the summary below.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def instance() -> DagsterInstance:
    """The instance under $DAGSTER_HOME (``make demo``: the project root), else ``<data dir>/dagster-home``;
    the packaged dagster.yaml goes in only where there is none."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(data_dir() / "dagster-home"))).resolve()
    for line in notes(home):
        print(line)
    return DagsterInstance.get()


def smoke_summary(result: ExecuteInProcessResult) -> str:
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == SMOKE_CHECK]
    meta: dict[str, Any] = {key: value.value for key, value in evaluation.metadata.items()}  # as the check wrote it
    verdict = "passed" if evaluation.passed else f"FAILED ({evaluation.description})"
    return (
        f"{verdict}: {meta['rows_streamed']} samples streamed by 2 workers, exactly once: {meta['exactly_once']}, "
        f"resumed at sample {meta['resumed_at_sample']}, continuation matches: {meta['continuation_matches']}, "
        f"{meta['rows_per_second']:.0f} rows/s"
    )


def plan_summary(result: ExecuteInProcessResult) -> str:
    """The training_plan check's headline: what the declared world would download and need on disk."""
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == PLAN_CHECK]
    meta: dict[str, Any] = {key: value.value for key, value in evaluation.metadata.items()}  # as the check wrote it
    return (
        f"{meta['world']}: {max(meta['bytes_per_node_first_epoch']):,} bytes per node in the first epoch, "
        f"recommended cache_limit {meta['plan_json']['recommendations'][0]['value']:,} bytes (mds plan for more)"
    )


def main() -> int:
    resources = default_resources(os.environ)
    # Read here, outside a run: its settings resolved as a run resolves them (an EnvVar to its value).
    store = resources["shard_store"].process_config_and_initialize()
    assert isinstance(store, ShardStore)
    spec = next(spec for spec in load_registry() if spec.name == os.environ.get("MDS_DEMO_DATASET", "digits"))
    days = daily(spec).get_partition_keys()[-3:]
    dagster = instance()
    for run_days in (days[:2], days[2:]):
        print(
            f"\n== {spec.name}: {', '.join(run_days)} ({spec.source.kind}, {spec.source.rows_per_day} rows/day)",
            flush=True,
        )
        result = materialize_days(spec, run_days, resources, instance=dagster, run_config=QUIET)
        print(f"   run {result.run_id} succeeded; loader smoke test {smoke_summary(result)}")
        print(f"   training plan for {plan_summary(result)}")
    shards = store.shard_set(spec.name)
    published = shards.published()
    shown = redact(store.url(spec.name))
    print(f"\nshard set: {shown}")
    for info in shards.versions()[-4:]:
        marker = "  <- published" if info.number == published else ""
        print(
            f"  version {info.number} (parent {info.parent}, {info.mode}): {info.rows} rows, {info.shards} shards, "
            f"{info.stored_bytes} bytes, days {', '.join(info.lineage.get('days', [])[-4:])}{marker}"
        )
    print(
        # No local=: StreamingDataset's own per-user cache, never a shared folder another user can fill first.
        "\nread it in training code:\n"
        f"  StreamingDataset(remote={shown!r}, version={published}, batch_size=32)\n"
        "train on it:  .venv/bin/python examples/train_digits.py --epochs 5\n"
        f"see the runs: make ui   (DAGSTER_HOME={os.environ['DAGSTER_HOME']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
