"""The schedule and the landing sensor, evaluated with Dagster's build contexts."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from dagster import SensorResult, SkipReason, build_schedule_context, build_sensor_context, materialize

from pipelines.assets.raw import raw_table
from pipelines.automation import daily_conversion, daily_schedule, landing_sensor
from pipelines.definitions import build_definitions
from pipelines.resources import LandingZone, ShardStore, SourceSettings


def test_schedule_requests_the_day_that_just_ended():
    defs = build_definitions()
    schedule = defs.resolve_schedule_def(daily_schedule.name)  # resolved against the job's assets
    context = build_schedule_context(scheduled_execution_time=datetime(2026, 3, 5, 1, 30, tzinfo=timezone.utc),
                                     repository_def=defs.get_repository_def())
    [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-03-04"
    assert schedule.job_name == daily_conversion.name
    assert schedule.cron_schedule == "30 1 * * *"


def land(folder: Path, day: str, name: str, text: str = "id,label\n1,2\n") -> Path:
    path = folder / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def evaluate(landing: Path, cursor: str | None = None) -> SensorResult | SkipReason:
    resources = {"landing": LandingZone(path=str(landing)), "source": SourceSettings(),
                 "shard_store": ShardStore(root=str(landing.parent / "shard-sets"))}
    return landing_sensor(build_sensor_context(cursor=cursor, resources=resources))


def commit_days(root: Path, days: list[str]) -> None:
    """A one-row version whose lineage says it holds ``days``, as the shard_set asset records it."""
    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    with ShardSet(str(root)).transaction(mode="overwrite", lineage={"days": days}) as tx:
        with MDSWriter(out=tx.out, columns={"id": "int64"}) as writer:
            writer.write({"id": 0})


def test_sensor_requests_one_run_per_new_or_changed_day(tmp_path):
    landing = tmp_path / "landing"
    assert isinstance(evaluate(landing), SkipReason)  # no folder yet: nothing to do, no error
    land(landing, "2026-02-01", "a.csv")
    land(landing, "2026-02-02", "b.json", '{"id": 1}\n')
    land(landing, "not-a-day", "c.csv")
    land(landing, "2026-02-03", "notes.txt")  # no known format: ignored

    result = evaluate(landing)
    requests = {r.partition_key: r for r in result.run_requests}
    assert sorted(requests) == ["2026-02-01", "2026-02-02"]
    config = requests["2026-02-01"].run_config["ops"]["raw_table"]["config"]
    assert config == {"kind": "path", "path": str(landing / "2026-02-01"), "format": "csv"}
    assert requests["2026-02-02"].run_config["ops"]["raw_table"]["config"]["format"] == "json"

    assert isinstance(evaluate(landing, result.cursor), SkipReason)  # same files: no new runs

    changed = land(landing, "2026-02-01", "a2.csv")
    os.utime(changed, ns=(1, 1))
    again = evaluate(landing, result.cursor)  # not converted yet (say its run failed): convert it again
    assert [r.partition_key for r in again.run_requests] == ["2026-02-01"]
    assert again.run_requests[0].run_key != requests["2026-02-01"].run_key

    commit_days(tmp_path / "shard-sets" / "digits", ["2026-02-01"])
    land(landing, "2026-02-01", "a3.csv")
    assert isinstance(evaluate(landing, again.cursor), SkipReason)  # in the shard set: never appended twice


def test_sensor_run_config_drives_the_raw_asset(tmp_path, resources, spark_session):
    landing = tmp_path / "landing"
    land(landing, "2026-02-01", "part.csv", "id,label,score\n1,3,0.5\n2,4,0.25\n")
    [request] = evaluate(landing).run_requests
    result = materialize([raw_table], partition_key=request.partition_key, run_config=request.run_config,
                         resources=resources)
    assert result.success
    rows = resources["catalog"].read_days(spark_session, "digits_raw", ["2026-02-01"]).orderBy("id").collect()
    assert [(r["id"], r["label"], r["score"], r["day"]) for r in rows] == [(1, 3, 0.5, "2026-02-01"),
                                                                            (2, 4, 0.25, "2026-02-01")]
