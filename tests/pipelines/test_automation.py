"""The schedule and the landing sensor, evaluated with Dagster's build contexts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import fsspec
from dagster import (
    RunRequest,
    ScheduleDefinition,
    SensorResult,
    build_schedule_context,
    build_sensor_context,
    materialize,
)

from mds_core import MDSWriter
from mds_core.versions import ShardSet
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


def tick(specs: list[DatasetSpec], schedule_name: str, at: datetime) -> tuple[ScheduleDefinition, Any]:
    """The schedule ``schedule_name`` of ``specs``' definitions, and its tick at ``at``."""
    defs = build_definitions(specs, default_resources({}))
    schedule = defs.resolve_schedule_def(schedule_name)  # resolved against the job's assets
    context = build_schedule_context(scheduled_execution_time=at, repository_def=defs.get_repository_def())
    return schedule, schedule.evaluate_tick(context)


def test_schedule_requests_the_day_that_just_ended():
    schedule, result = tick(load_registry(), "digits_daily_schedule", datetime(2026, 3, 5, 1, 30, tzinfo=UTC))
    [request] = run_requests(result)
    assert request.partition_key == "2026-03-04"
    assert schedule.job_name == "digits_daily"
    assert schedule.cron_schedule == "30 1 * * *"


def test_a_registry_schedule_ticks_at_its_cron_and_requests_the_day_that_ended():
    specs = [DatasetSpec(name="events", start_date="2026-03-05", schedule="*/5 * * * *")]
    schedule, early = tick(specs, "events_daily_schedule", datetime(2026, 3, 5, 23, 55, tzinfo=UTC))
    assert schedule.cron_schedule == "*/5 * * * *" and schedule.execution_timezone == "UTC"
    assert early.run_requests == [] and early.skip_message == "no day since 2026-03-05 has ended yet"
    [request] = run_requests(tick(specs, "events_daily_schedule", datetime(2026, 3, 6, 0, 5, tzinfo=UTC))[1])
    assert (request.partition_key, request.run_key) == ("2026-03-05", "2026-03-05")


def land(folder: Path, day: str, name: str, text: str = "id,label\n1,2\n") -> Path:
    path = folder / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skipped(result: SensorResult) -> bool:
    return result.skip_reason is not None and not result.run_requests


def evaluate(
    spec: DatasetSpec, landing: Path | str, cursor: str | None = None, sets: Path | None = None
) -> SensorResult:
    """The dataset's sensor on the landing zone ``landing`` (its day folders are under ``landing/<dataset>/``),
    the shard sets in ``sets`` (by default beside a local landing zone)."""
    shard_sets = sets or Path(landing).parent / "shard-sets"
    resources = {"landing": LandingZone(path=str(landing)), "shard_store": ShardStore(root=str(shard_sets))}
    result = landing_sensor(spec)(build_sensor_context(cursor=cursor, resources=resources))
    assert isinstance(result, SensorResult)  # the sensor always answers with one SensorResult
    return result


def commit_days(root: Path, days: list[str]) -> None:
    """A published version holding ``days``, one row each, each day its own partition (as shard_set writes)."""
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
    [theirs] = run_requests(evaluate(spec.model_copy(update={"name": "synthetic"}), landing))  # each its own folder
    their_config = {"kind": "path", "path": str(landing / "synthetic" / "2026-02-04"), "format": "csv"}
    assert theirs.run_config["ops"] == {"synthetic__raw_table": {"config": their_config}}

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


def test_the_sensor_watches_a_landing_zone_on_s3(tmp_path, spec, s3_server):
    """The landing zone is a bucket on the loopback S3 server: listed through s3fs, one run per new day."""
    bucket = s3_server.new_bucket()
    fs = fsspec.filesystem("s3", client_kwargs={"endpoint_url": s3_server.endpoint})
    fs.pipe(f"{bucket}/landing/digits/2026-02-01/part-0.parquet", b"not read by the sensor")
    fs.pipe(f"{bucket}/landing/digits/2026-02-02/a.csv", b"id\n1\n")
    landing, sets = f"s3://{bucket}/landing", tmp_path / "shard-sets"
    result = evaluate(spec, landing, sets=sets)
    requests = {day: r.run_config["ops"]["digits__raw_table"]["config"] for day, r in requests_by_day(result).items()}
    assert requests == {
        "2026-02-01": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-01", "format": "parquet"},
        "2026-02-02": {"kind": "path", "path": f"s3://{bucket}/landing/digits/2026-02-02", "format": "csv"},
    }
    assert skipped(evaluate(spec, landing, result.cursor, sets))
    fs.pipe(f"{bucket}/landing/digits/2026-02-02/a.csv", b"id\n1\n2\n")  # rewritten: a new ETag and size
    changed = evaluate(spec, landing, result.cursor, sets)
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
