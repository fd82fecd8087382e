"""The schedule and the landing sensor, evaluated with Dagster's build contexts."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from dagster import SensorResult, build_schedule_context, build_sensor_context, materialize

from pipelines.assets.raw import build_raw_table
from pipelines.automation import daily_job, landing_sensor
from pipelines.conventions import op_name
from pipelines.definitions import build_definitions
from pipelines.registry import DatasetSpec, load_registry
from pipelines.resources import LandingZone, ShardStore, default_resources


def test_schedule_requests_the_day_that_just_ended():
    defs = build_definitions(load_registry(), default_resources({}))
    schedule = defs.resolve_schedule_def("digits_daily_schedule")  # resolved against the job's assets
    context = build_schedule_context(
        scheduled_execution_time=datetime(2026, 3, 5, 1, 30, tzinfo=UTC), repository_def=defs.get_repository_def()
    )
    [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-03-04"
    assert schedule.job_name == "digits_daily"
    assert schedule.cron_schedule == "30 1 * * *"


def test_a_registry_schedule_ticks_at_its_cron_and_requests_the_day_that_ended():
    spec = DatasetSpec(name="events", start_date="2026-03-05", schedule="*/5 * * * *")
    defs = build_definitions([spec], default_resources({}))
    schedule = defs.resolve_schedule_def("events_daily_schedule")
    assert schedule.cron_schedule == "*/5 * * * *" and schedule.execution_timezone == "UTC"

    def tick(at: datetime):
        context = build_schedule_context(scheduled_execution_time=at, repository_def=defs.get_repository_def())
        return schedule.evaluate_tick(context)

    early = tick(datetime(2026, 3, 5, 23, 55, tzinfo=UTC))  # the first day has not ended
    assert early.run_requests == [] and early.skip_message == "no day since 2026-03-05 has ended yet"
    [request] = tick(datetime(2026, 3, 6, 0, 5, tzinfo=UTC)).run_requests
    assert (request.partition_key, request.run_key) == ("2026-03-05", "2026-03-05")


def land(folder: Path, day: str, name: str, text: str = "id,label\n1,2\n") -> Path:
    path = folder / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skipped(result: SensorResult) -> bool:
    return result.skip_reason is not None and not result.run_requests


def evaluate(spec: DatasetSpec, landing: Path, cursor: str | None = None) -> SensorResult:
    """The dataset's sensor on the landing zone ``landing`` (its day folders are under ``landing/<dataset>/``)."""
    resources = {
        "landing": LandingZone(path=str(landing)),
        "shard_store": ShardStore(root=str(landing.parent / "shard-sets")),
    }
    sensor = landing_sensor(spec, daily_job(spec))
    return sensor(build_sensor_context(cursor=cursor, resources=resources))


def commit_days(root: Path, days: list[str]) -> None:
    """A one-row published version whose lineage says it holds ``days`` (versions before partitions)."""
    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    with ShardSet(str(root)).transaction(mode="overwrite", lineage={"days": days}) as tx:
        with MDSWriter(out=tx.out, columns={"id": "int64"}) as writer:
            writer.write({"id": 0})


def test_sensor_requests_one_run_per_new_or_changed_day(tmp_path, spec):
    landing = tmp_path / "landing"
    folder = landing / spec.name  # the dataset's own landing folder
    raw_op = op_name(spec, "raw_table")
    assert skipped(evaluate(spec, landing))  # no folder yet: nothing to do, no error
    land(folder, "2026-02-01", "a.csv")
    land(folder, "2026-02-02", "b.json", '{"id": 1}\n')
    land(folder, "not-a-day", "c.csv")
    land(folder, "2026-02-03", "notes.txt")  # no known format: ignored
    land(landing / "synthetic", "2026-02-04", "d.csv")  # another dataset's folder: not this sensor's

    result = evaluate(spec, landing)
    requests = {r.partition_key: r for r in result.run_requests}
    assert sorted(requests) == ["2026-02-01", "2026-02-02"]
    config = requests["2026-02-01"].run_config["ops"][raw_op]["config"]
    assert config == {"kind": "path", "path": str(folder / "2026-02-01"), "format": "csv"}
    assert requests["2026-02-02"].run_config["ops"][raw_op]["config"]["format"] == "json"
    assert requests["2026-02-01"].tags["dataset"] == "digits"

    assert skipped(evaluate(spec, landing, result.cursor))  # same files: no new runs

    changed = land(folder, "2026-02-01", "a2.csv")
    os.utime(changed, ns=(1, 1))
    again = evaluate(spec, landing, result.cursor)  # not converted yet (say its run failed): convert it again
    assert [r.partition_key for r in again.run_requests] == ["2026-02-01"]
    assert again.run_requests[0].run_key != requests["2026-02-01"].run_key

    # Published: 2026-02-01 (seen before) and 2026-02-05 (converted before the sensor first saw its folder).
    commit_days(tmp_path / "shard-sets" / "digits", ["2026-02-01", "2026-02-05"])
    assert skipped(evaluate(spec, landing, again.cursor))  # nothing changed since
    land(folder, "2026-02-05", "e.csv")
    first_seen = evaluate(spec, landing, again.cursor)
    assert skipped(first_seen)  # first seen but published: left alone, and remembered in the cursor
    land(folder, "2026-02-01", "a3.csv")
    land(folder, "2026-02-05", "e2.csv")
    replaced = evaluate(spec, landing, first_seen.cursor)  # changed after publication: runs replace the days
    assert sorted(r.partition_key for r in replaced.run_requests) == ["2026-02-01", "2026-02-05"]


def test_each_dataset_watches_its_own_folder(tmp_path, spec):
    landing = tmp_path / "landing"
    other = spec.model_copy(update={"name": "other"})
    land(landing / "other", "2026-02-01", "a.csv")
    assert skipped(evaluate(spec, landing))
    [request] = evaluate(other, landing).run_requests
    assert request.run_config["ops"] == {
        "other__raw_table": {"config": {"kind": "path", "path": str(landing / "other" / "2026-02-01"), "format": "csv"}}
    }


def test_the_sensor_watches_a_landing_zone_on_s3(tmp_path, spec, s3_server):
    """The landing zone is a bucket on the loopback S3 server: listed through s3fs, one run per new day."""
    import fsspec

    bucket = s3_server.new_bucket()
    fs = fsspec.filesystem("s3", client_kwargs={"endpoint_url": s3_server.endpoint})
    fs.pipe(f"{bucket}/landing/digits/2026-02-01/part-0.parquet", b"not read by the sensor")
    fs.pipe(f"{bucket}/landing/digits/2026-02-02/a.csv", b"id\n1\n")
    resources = {
        "landing": LandingZone(path=f"s3://{bucket}/landing"),
        "shard_store": ShardStore(root=str(tmp_path / "shard-sets")),
    }
    result = landing_sensor(spec, daily_job(spec))(build_sensor_context(resources=resources))
    requests = {r.partition_key: r.run_config["ops"]["digits__raw_table"]["config"] for r in result.run_requests}
    assert requests == {
        "2026-02-01": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-01", "format": "parquet"},
        "2026-02-02": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-02", "format": "csv"},
    }
    again = landing_sensor(spec, daily_job(spec))(build_sensor_context(cursor=result.cursor, resources=resources))
    assert skipped(again)
    fs.pipe(f"{bucket}/landing/digits/2026-02-02/a.csv", b"id\n1\n2\n")  # rewritten: a new ETag and size
    changed = landing_sensor(spec, daily_job(spec))(build_sensor_context(cursor=result.cursor, resources=resources))
    assert [r.partition_key for r in changed.run_requests] == ["2026-02-02"]


def test_sensor_run_config_drives_the_raw_asset(tmp_path, resources, spec, spark_session):
    landing = tmp_path / "landing"
    land(landing / spec.name, "2026-02-01", "part.csv", "id,label,score\n1,3,0.5\n2,4,0.25\n")
    [request] = evaluate(spec, landing).run_requests
    result = materialize(
        [build_raw_table(spec)], partition_key=request.partition_key, run_config=request.run_config, resources=resources
    )
    assert result.success
    rows = resources["catalog"].read_days(spark_session, "digits_raw", ["2026-02-01"]).orderBy("id").collect()
    assert [(r["id"], r["label"], r["score"], r["day"]) for r in rows] == [
        (1, 3, 0.5, "2026-02-01"),
        (2, 4, 0.25, "2026-02-01"),
    ]
