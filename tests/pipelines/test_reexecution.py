"""'Re-execute from failure' after a failed smoke test: the new run tests and publishes the version the
failed run wrote (its steps that succeeded are not run again)."""

from __future__ import annotations

import os

from dagster import DagsterInstance, JobDefinition, ReexecutionOptions, execute_job, reconstructable

DAY = "2026-01-02"


def digits_daily() -> JobDefinition:
    """The digits dataset's daily job with the environment's resources (reconstructable by module path)."""
    from pipelines.definitions import build_definitions
    from pipelines.resources import default_resources
    from tests.pipelines.conftest import SPARK, digits

    resources = {**default_resources(os.environ), "spark": SPARK}
    return build_definitions([digits()], resources).resolve_job_def("digits_daily")


def smoke_demand(rows_per_second: int) -> dict:
    return {"resources": {"smoke_settings": {"config": {"batch_size": 8, "min_rows_per_second": rows_per_second}}}}


def test_reexecute_from_failure_publishes_the_failed_runs_version(monkeypatch, tmp_path, spark_session):
    from mds_core.versions import ShardSet

    monkeypatch.setenv("MDS_DATA_DIR", str(tmp_path / "data"))
    with DagsterInstance.ephemeral() as instance:
        job = reconstructable(digits_daily)
        with execute_job(
            job, instance, tags={"dagster/partition": DAY}, raise_on_error=False, run_config=smoke_demand(10**12)
        ) as first:  # the first run's smoke test fails
            assert not first.success
            failed_steps = {e.step_key for e in first.all_events if e.is_step_failure}
        shard_set = ShardSet(str(tmp_path / "data" / "shard-sets" / "digits"))
        assert shard_set.published() is None and [v.number for v in shard_set.versions()] == [1]

        options = ReexecutionOptions.from_failure(first.run_id, instance)
        # The demand fixed in the re-execution's config, as the UI's re-execute Launchpad allows.
        with execute_job(
            job, instance, reexecution_options=options, run_config=smoke_demand(0), tags={"dagster/partition": DAY}
        ) as second:  # the UI copies the parent's tags
            assert second.success
            ran = {e.step_key for e in second.all_events if e.is_step_success}
    assert "digits__shard_set" not in ran and "digits__published_version" in ran, (failed_steps, ran)
    assert shard_set.published() == 1 and [v.number for v in shard_set.versions()] == [1]
