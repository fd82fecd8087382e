"""`make demo`.

The digits dataset's last three days, each converted by its own run of the dataset's daily job, as the schedule would
have done, then what came out.

The runs are launched from the code location through the instance's run queue (a ``dagster-daemon``
serves it meanwhile), so ``make ui`` shows them under ``digits_daily`` with a result for every check
of every day. The demo's dataset starts where its data starts: it is the registry's entry with its
first partition moved to the first day converted, written to ``<data dir>/demo-datasets.yaml``, which
``make ui`` loads too. Each day builds on the version the day before published; running the demo
again replaces the days it redoes.

Runs are recorded in ``$DAGSTER_HOME``. Environment variables such as ``MDS_SHARD_STORE=s3://bucket/
prefix`` point the demo elsewhere (docs/pipelines.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from dagster import DagsterInstance

from mds_core.storage.urls import redact
from pipelines.assets.plan import PLAN_CHECK
from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.automation import daily_job_name
from pipelines.instance import notes
from pipelines.launch import check_results, daemon, launch_day, write_workspace
from pipelines.paths import data_dir
from pipelines.registry import DatasetSpec, load_registry, registry_path
from pipelines.resources import ShardStore, default_resources

DAYS = 3
REGISTRY = "demo-datasets.yaml"  # under the data dir; the Makefile's `ui` loads it when it is there
# The full event log is in the UI (`make ui`); the run's own console gets warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def instance() -> DagsterInstance:
    """The instance under $DAGSTER_HOME (``make demo``: the project root), else ``<data dir>/dagster-home``.

    The packaged dagster.yaml goes in only where there is none.
    """
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(data_dir() / "dagster-home"))).resolve()
    for line in notes(home):
        print(line)
    return DagsterInstance.get()


def demo_days(today: date) -> list[str]:
    """The last ``DAYS`` days that have ended."""
    return [(today - timedelta(days=back)).isoformat() for back in range(DAYS, 0, -1)]


def demo_registry(spec: DatasetSpec, first_day: str, path: Path) -> Path:
    """The demo's registry: ``spec`` alone, its partitions starting at ``first_day``."""
    entry = {**spec.model_dump(mode="json"), "start_date": first_day}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by `make demo` (pipelines/demo.py): the demo's dataset, starting on its first converted day.\n"
        + yaml.safe_dump({"datasets": [entry]}, sort_keys=False)
    )
    return path


def check_meta(results: dict[str, Any], name: str) -> tuple[bool, dict[str, Any]]:
    """Whether the check ``name`` passed, and its metadata as plain values."""
    evaluation = results[name]
    return evaluation.passed, {key: value.value for key, value in evaluation.metadata.items()}


def smoke_summary(results: dict[str, Any]) -> str:
    """The smoke test's verdict and figures in one line."""
    passed, meta = check_meta(results, SMOKE_CHECK)
    verdict = "passed" if passed else f"FAILED ({results[SMOKE_CHECK].description})"
    return (
        f"{verdict}: {meta['rows_streamed']} samples streamed by 2 workers, exactly once: {meta['exactly_once']}, "
        f"resumed at sample {meta['resumed_at_sample']}, continuation matches: {meta['continuation_matches']}, "
        f"{meta['rows_per_second']:.0f} rows/s"
    )


def plan_summary(results: dict[str, Any]) -> str:
    """The training_plan check's headline, as the UI shows it: what the declared world would download."""
    return f"{results[PLAN_CHECK].description} (mds plan for more)"


def run_days(spec: DatasetSpec, days: list[str], dagster: DagsterInstance) -> None:
    """Each day through the daily job, in order; the daemon's log goes to ``<data dir>/demo-daemon.log``."""
    log_path = data_dir() / "demo-daemon.log"
    with tempfile.TemporaryDirectory() as folder, log_path.open("w") as log:
        workspace = write_workspace(Path(folder))
        with daemon(workspace, log):
            for day in days:
                print(f"\n== {spec.name} {day} ({spec.source.kind}, {spec.source.rows_per_day} rows/day)", flush=True)
                run = launch_day(dagster, workspace, daily_job_name(spec), day, log, run_config=QUIET)
                results = check_results(dagster, run.run_id)
                print(f"   run {run.run_id} of {run.job_name} succeeded; loader smoke test {smoke_summary(results)}")
                print(f"   training plan for {plan_summary(results)}", flush=True)


def show_versions(spec: DatasetSpec) -> None:
    """Print the dataset's versions and which one is published."""
    store = default_resources(os.environ)["shard_store"].process_config_and_initialize()
    assert isinstance(store, ShardStore)
    shards = store.shard_set(spec.name)
    published = shards.published()
    shown = redact(store.url(spec.name))
    print(f"\nshard set: {shown}")
    for info in shards.versions()[-4:]:
        marker = "  <- published" if info.number == published else ""
        parent = f"on version {info.parent}" if info.parent is not None else "the first"
        print(
            f"  version {info.number} ({parent}, {info.mode}): {info.rows} rows, {info.shards} shards, "
            f"{info.stored_bytes:,} bytes, days {', '.join(info.lineage.get('days', [])[-4:])}{marker}"
        )
    print(
        # No local=: StreamingDataset's own per-user cache, never a shared folder another user can fill first.
        "\nread it in training code:\n"
        f"  StreamingDataset(remote={shown!r}, version={published}, batch_size=32)\n"
        "train on it:  .venv/bin/python examples/train_digits.py --epochs 5\n"
        f"see the runs: make ui   (DAGSTER_HOME={os.environ['DAGSTER_HOME']}; the runs are under {daily_job_name(spec)})"
    )


def main() -> int:
    """Convert the demo days, each in its own run, then show the versions that came out."""
    name = os.environ.get("MDS_DEMO_DATASET", "digits")
    spec = next(spec for spec in load_registry() if spec.name == name)
    days = demo_days(datetime.now(UTC).date())
    os.environ["MDS_DATASETS"] = str(demo_registry(spec, days[0], data_dir() / REGISTRY))
    spec = spec.model_copy(update={"start_date": days[0]})
    print(f"registry: {registry_path()} ({spec.name} from {days[0]}; `make ui` loads it too)")
    run_days(spec, days, instance())
    show_versions(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
