"""Operating a dataset day after day through dagster.materialize(): replacing a day, recovering from a
failed smoke test, rolling back, re-executing from failure, checks on their own, and two datasets."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetCheckKey, AssetSelection, DagsterInstance

from pipelines.assets.plan import PLAN_CHECK
from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.conventions import key
from pipelines.definitions import build_definitions
from pipelines.registry import DatasetSpec, Source
from pipelines.resources import SmokeTestSettings, TrainingWorldSettings
from pipelines.runs import materialize_days
from tests.pipelines.conftest import DAYS, check, digits, materialization, meta, shard_files, stream_ids

CHECKS = (SMOKE_CHECK, PLAN_CHECK)
FAILING = SmokeTestSettings(batch_size=8, min_rows_per_second=10**12)  # a real failure: throughput demand


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
    smoke = check(failed, SMOKE_CHECK)
    assert not failed.success and not smoke.passed and "below the required" in smoke.description
    assert meta(smoke)["exactly_once"]  # the data was fine; only the throughput demand failed
    assert not failed.asset_materializations_for_node("digits__published_version")
    assert [v.number for v in shard_set.versions()] == [1, 2]  # committed, but not published
    assert shard_set.published() == 1

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


def test_the_checks_run_on_their_own_against_the_latest_version(resources, spec):
    """Executed alone (no shard set in the run), the checks test and plan the latest version; the plan warns about
    a small cache limit, never blocks; a check alone publishes nothing."""
    instance = DagsterInstance.ephemeral()
    assert materialize_days(spec, DAYS[:1], resources, instance=instance).success
    resources["smoke_settings"] = FAILING
    assert not materialize_days(spec, DAYS[1:2], resources, instance=instance, raise_on_error=False).success
    resources["smoke_settings"] = SmokeTestSettings(batch_size=8)
    resources["training_world"] = TrainingWorldSettings(world="1x2x2", batch_size=4, cache_limit="1kb")
    checks_only = AssetSelection.checks(*(AssetCheckKey(key(spec, "shard_set"), name) for name in CHECKS))
    result = materialize_days(spec, DAYS[1:2], resources, instance=instance, selection=checks_only)
    smoke, plan = check(result, SMOKE_CHECK), check(result, PLAN_CHECK)
    assert result.success and smoke.passed
    assert meta(smoke)["version"] == meta(plan)["version"] == 2  # the latest version, although never published
    assert not plan.passed and plan.severity.value == "WARN"
    assert "StreamingDataset refuses cache_limit=1,024 bytes" in plan.description
    assert resources["shard_store"].shard_set("digits").published() == 1


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
