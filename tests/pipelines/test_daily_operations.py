"""Operating a dataset day after day through dagster.materialize(): replacing a day, recovering from a
failed smoke test, rolling back, re-executing from failure, checks on their own, and two datasets."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetCheckKey, AssetSelection, DagsterInstance

from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.conventions import key
from pipelines.definitions import build_definitions
from pipelines.registry import DatasetSpec, Source
from pipelines.resources import SmokeTestSettings
from pipelines.runs import materialize_days
from tests.pipelines.conftest import digits
from tests.pipelines.test_shard_sets import check, materialization, meta, stream_ids

DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
FAILING = SmokeTestSettings(batch_size=8, min_rows_per_second=10**12)  # a real failure: throughput demand


def shard_files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*.zstd")}


def test_replacing_a_day_keeps_the_other_days_shards(resources, spec):
    assert materialize_days(spec, DAYS[:2], resources).success  # version 1: days 1 and 2
    root = Path(resources["shard_store"].url("digits"))
    before = shard_files(root)
    shard_set = resources["shard_store"].shard_set("digits")
    day2_shards = set(shard_set.version(1).partitions[DAYS[1]])

    smaller = digits(rows_per_day=30)  # the source changed for day 1: redo that day only
    result = materialize_days(smaller, DAYS[:1], resources)
    assert result.success
    written = meta(materialization(result, "shard_set"))
    assert (written["version"], written["parent"], written["mode"]) == (2, 1, "replace")
    assert written["replaced_days"] == [DAYS[0]] and written["rows"] == 30 + 60
    version = shard_set.version(2)
    assert set(version.partitions) == set(DAYS[:2]) and set(version.partitions[DAYS[1]]) == day2_shards
    assert shard_set.published() == 2
    after = shard_files(root)
    assert {name: after[name] for name in before} == before, "a replace rewrote shards"
    # Day 1 now holds ids 0-29 (30 rows a day); day 2 still its 60 rows from the first run.
    assert stream_ids(resources, 2, root.parent / "read") == list(range(30)) + list(range(60, 120))


def test_failed_smoke_test_then_next_day_then_rerun(resources, spec, tmp_path):
    shard_set = resources["shard_store"].shard_set("digits")
    assert materialize_days(spec, DAYS[:1], resources).success  # version 1, published
    good = resources["smoke_settings"]
    resources["smoke_settings"] = FAILING
    failed = materialize_days(spec, DAYS[1:2], resources, raise_on_error=False)
    assert not failed.success and not check(failed, SMOKE_CHECK).passed
    assert shard_set.published() == 1  # version 2 exists, unpublished

    resources["smoke_settings"] = good
    next_day = materialize_days(spec, DAYS[2:3], resources)  # builds on the last good version, not on 2
    written = meta(materialization(next_day, "shard_set"))
    assert (written["version"], written["parent"], written["mode"]) == (3, 1, "append")
    assert written["lineage"]["days"] == [DAYS[0], DAYS[2]] and shard_set.published() == 3

    rerun = materialize_days(spec, DAYS[1:2], resources)  # the failed day runs again, on version 3
    written = meta(materialization(rerun, "shard_set"))
    assert (written["version"], written["parent"], written["mode"]) == (4, 3, "append")
    assert written["lineage"]["days"] == DAYS and shard_set.published() == 4
    assert stream_ids(resources, 4, tmp_path / "read") == list(range(180))


def test_rollback_and_publish_from_the_job(resources, spec):
    assert materialize_days(spec, DAYS[:1], resources).success
    assert materialize_days(spec, DAYS[1:2], resources).success
    shard_set = resources["shard_store"].shard_set("digits")
    assert shard_set.published() == 2
    job = build_definitions([spec], resources).resolve_job_def("digits_publish")
    rolled = job.execute_in_process()  # the Launchpad's default: roll back
    assert rolled.success and rolled.output_for_node("digits_publish_or_rollback") == 1
    assert shard_set.published() == 1
    again = job.execute_in_process(
        run_config={"ops": {"digits_publish_or_rollback": {"config": {"action": "publish", "version": 2}}}}
    )
    assert again.success and shard_set.published() == 2


def test_the_smoke_check_runs_on_its_own_against_the_latest_version(resources, spec):
    instance = DagsterInstance.ephemeral()
    assert materialize_days(spec, DAYS[:1], resources, instance=instance).success
    resources["smoke_settings"] = FAILING
    assert not materialize_days(spec, DAYS[1:2], resources, instance=instance, raise_on_error=False).success
    resources["smoke_settings"] = SmokeTestSettings(batch_size=8)
    smoke_only = AssetSelection.checks(AssetCheckKey(key(spec, "shard_set"), SMOKE_CHECK))
    result = materialize_days(spec, DAYS[1:2], resources, instance=instance, selection=smoke_only)
    evaluation = check(result, SMOKE_CHECK)
    assert result.success and evaluation.passed
    assert meta(evaluation)["version"] == 2  # the latest version, although it was never published
    assert resources["shard_store"].shard_set("digits").published() == 1  # a check alone publishes nothing


def test_two_datasets_keep_separate_histories(resources, spec, tmp_path):
    other = DatasetSpec(name="synthetic", source=Source(kind="synthetic", rows_per_day=100), start_date="2025-12-01")
    assert materialize_days(spec, DAYS[:1], resources).success
    result = materialize_days(other, DAYS[:2], resources)
    assert result.success
    written = meta(materialization(result, "shard_set", dataset="synthetic"))
    assert written["version"] == 1 and written["rows"] == 200 and written["lineage"]["dataset"] == "synthetic"
    store = resources["shard_store"]
    assert [v.number for v in store.shard_set("digits").versions()] == [1]
    assert store.shard_set("digits").version(1).rows == 60 and store.shard_set("synthetic").published() == 1
    assert store.url("synthetic") != store.url("digits")
    # Synthetic ids count from its own start date: 2026-01-01 is its day 31.
    assert stream_ids({"shard_store": store}, 1, tmp_path / "s", dataset="synthetic")[:1] == [3100]
    warehouse = Path(resources["catalog"].location("x")).parent
    assert {"digits_raw", "synthetic_raw", "digits_validated", "synthetic_validated"} <= {
        p.name for p in warehouse.iterdir()
    }
