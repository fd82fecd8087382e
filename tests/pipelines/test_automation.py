"""The schedule and the landing sensor, evaluated with Dagster's build contexts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from dagster import (
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    build_schedule_context,
    build_sensor_context,
    materialize,
)

from pipelines.assets.raw import build_raw_table
from pipelines.automation import landing_sensor
from pipelines.conventions import op_name
from pipelines.definitions import build_definitions
from pipelines.registry import DatasetSpec, load_registry
from pipelines.resources import LandingZone, ShardStore, default_resources


class Evaluation(Protocol):
    """A schedule tick's or a sensor's result: both carry the runs it requests."""

    @property
    def run_requests(self) -> Sequence[RunRequest] | None: ...


def run_requests(result: Evaluation) -> list[RunRequest]:
    """The runs ``result`` requests (a result that requests none still carries an empty list)."""
    assert result.run_requests is not None
    return list(result.run_requests)


def requests_by_day(result: Evaluation) -> dict[str, RunRequest]:
    """The runs ``result`` requests, keyed by the day (the partition) each converts."""
    by_day: dict[str, RunRequest] = {}
    for request in run_requests(result):
        assert request.partition_key is not None
        by_day[request.partition_key] = request
    return by_day


def test_schedule_requests_the_day_that_just_ended():
    defs = build_definitions(load_registry(), default_resources({}))
    schedule = defs.resolve_schedule_def("digits_daily_schedule")  # resolved against the job's assets
    context = build_schedule_context(
        scheduled_execution_time=datetime(2026, 3, 5, 1, 30, tzinfo=UTC), repository_def=defs.get_repository_def()
    )
    [request] = run_requests(schedule.evaluate_tick(context))
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
    [request] = run_requests(tick(datetime(2026, 3, 6, 0, 5, tzinfo=UTC)))
    assert (request.partition_key, request.run_key) == ("2026-03-05", "2026-03-05")


def land(folder: Path, day: str, name: str, text: str = "id,label\n1,2\n") -> Path:
    path = folder / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skipped(result: SensorResult) -> bool:
    return result.skip_reason is not None and not result.run_requests


def sense(spec: DatasetSpec, context: SensorEvaluationContext) -> SensorResult:
    """The dataset's landing sensor evaluated in ``context`` (it always answers with one SensorResult)."""
    result = landing_sensor(spec)(context)
    assert isinstance(result, SensorResult)
    return result


def evaluate(spec: DatasetSpec, landing: Path, cursor: str | None = None) -> SensorResult:
    """The dataset's sensor on the landing zone ``landing`` (its day folders are under ``landing/<dataset>/``)."""
    resources = {
        "landing": LandingZone(path=str(landing)),
        "shard_store": ShardStore(root=str(landing.parent / "shard-sets")),
    }
    return sense(spec, build_sensor_context(cursor=cursor, resources=resources))


def commit_days(root: Path, days: list[str]) -> None:
    """A published version holding ``days``, one row each, each day its own partition (as shard_set writes)."""
    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    with ShardSet(str(root)).transaction(mode="overwrite", lineage={"days": days}) as tx:
        for number, day in enumerate(days):
            with MDSWriter(out=tx.partition_out(day), columns={"id": "int64"}) as writer:
                writer.write({"id": number})


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
    requests = requests_by_day(result)
    assert sorted(requests) == ["2026-02-01", "2026-02-02"]
    config = requests["2026-02-01"].run_config["ops"][raw_op]["config"]
    assert config == {"kind": "path", "path": str(folder / "2026-02-01"), "format": "csv"}
    assert requests["2026-02-02"].run_config["ops"][raw_op]["config"]["format"] == "json"
    assert requests["2026-02-01"].tags["dataset"] == "digits"

    assert skipped(evaluate(spec, landing, result.cursor))  # same files: no new runs

    changed = land(folder, "2026-02-01", "a2.csv")
    os.utime(changed, ns=(1, 1))
    again = evaluate(spec, landing, result.cursor)  # not converted yet (say its run failed): convert it again
    [rerun] = run_requests(again)
    assert rerun.partition_key == "2026-02-01"
    assert rerun.run_key != requests["2026-02-01"].run_key

    # Published: 2026-02-01 (seen before) and 2026-02-05 (converted before the sensor first saw its folder).
    commit_days(tmp_path / "shard-sets" / "digits", ["2026-02-01", "2026-02-05"])
    assert skipped(evaluate(spec, landing, again.cursor))  # nothing changed since
    land(folder, "2026-02-05", "e.csv")
    first_seen = evaluate(spec, landing, again.cursor)
    assert skipped(first_seen)  # first seen but published: left alone, and remembered in the cursor
    land(folder, "2026-02-01", "a3.csv")
    land(folder, "2026-02-05", "e2.csv")
    replaced = evaluate(spec, landing, first_seen.cursor)  # changed after publication: runs replace the days
    assert sorted(requests_by_day(replaced)) == ["2026-02-01", "2026-02-05"]


def test_each_dataset_watches_its_own_folder(tmp_path, spec):
    landing = tmp_path / "landing"
    other = spec.model_copy(update={"name": "other"})
    land(landing / "other", "2026-02-01", "a.csv")
    assert skipped(evaluate(spec, landing))
    [request] = run_requests(evaluate(other, landing))
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
    result = sense(spec, build_sensor_context(resources=resources))
    requests = {day: r.run_config["ops"]["digits__raw_table"]["config"] for day, r in requests_by_day(result).items()}
    assert requests == {
        "2026-02-01": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-01", "format": "parquet"},
        "2026-02-02": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-02", "format": "csv"},
    }
    again = sense(spec, build_sensor_context(cursor=result.cursor, resources=resources))
    assert skipped(again)
    fs.pipe(f"{bucket}/landing/digits/2026-02-02/a.csv", b"id\n1\n2\n")  # rewritten: a new ETag and size
    changed = sense(spec, build_sensor_context(cursor=result.cursor, resources=resources))
    assert list(requests_by_day(changed)) == ["2026-02-02"]


def test_sensor_run_config_drives_the_raw_asset(tmp_path, resources, spec, spark_session):
    landing = tmp_path / "landing"
    land(landing / spec.name, "2026-02-01", "part.csv", "id,label,score\n1,3,0.5\n2,4,0.25\n")
    [request] = run_requests(evaluate(spec, landing))
    result = materialize(
        [build_raw_table(spec)], partition_key=request.partition_key, run_config=request.run_config, resources=resources
    )
    assert result.success
    rows = resources["catalog"].read_days(spark_session, "digits_raw", ["2026-02-01"]).orderBy("id").collect()
    assert [(r["id"], r["label"], r["score"], r["day"]) for r in rows] == [
        (1, 3, 0.5, "2026-02-01"),
        (2, 4, 0.25, "2026-02-01"),
    ]
