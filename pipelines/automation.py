"""Automation per dataset: its daily job and schedule, and a sensor on its landing folder (any fsspec URL).

Schedules and sensors start stopped, so `dagster dev` launches nothing by itself; turn them on in the
UI (Automation tab), or have them start running with each dataset component's ``automation: on``
(``MDS_AUTOMATION=on``).
"""

# No `from __future__ import annotations`: Dagster reads the resource annotations at runtime.
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import (
    AssetSelection,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from mds_core.storage.urls import redact
from pipelines.assets.shards import days_of
from pipelines.conventions import daily, op_name, schedule_status, sensor_status
from pipelines.landing import day_url, landed_days
from pipelines.registry import DatasetSpec
from pipelines.resources import LandingZone, ShardStore


def daily_job_name(spec: DatasetSpec) -> str:
    """The name of ``spec``'s daily job."""
    return f"{spec.name}_daily"


def daily_job(spec: DatasetSpec) -> Any:  # Dagster exports no name for the unresolved job define_asset_job makes
    """The job that materialises ``spec``'s whole graph for a day."""
    return define_asset_job(
        daily_job_name(spec),
        selection=AssetSelection.groups(spec.name),
        tags={"dataset": spec.name},
        description=f"{spec.name}: one day (or, as a backfill, a range of days) from the source to a published "
        "version. A day already in the published version is replaced.",
    )


def daily_schedule(spec: DatasetSpec, running: bool = False) -> ScheduleDefinition:
    """At the registry's ``schedule`` (cron, UTC; default 01:30), the day that had ended by then.

    A plain schedule, not ``build_schedule_from_partitioned_job``: that one takes only a time of day
    for a daily job, and a deployment may want another cadence. Each tick requests the day that had
    ended by then (the day is the run key, which Dagster dedups within a tick, not across ticks), so a
    cron that ticks more often than daily converts the same day again: replace mode, the same result.
    """

    @schedule(
        name=f"{spec.name}_daily_schedule",
        job_name=daily_job_name(spec),
        cron_schedule=spec.schedule,
        execution_timezone="UTC",
        default_status=schedule_status(running),
        description=f"Converts the day that just ended ({spec.schedule}, UTC).",
    )
    def convert_the_day_that_ended(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
        # Daily partitions are UTC days: the last one complete at the tick is the day before the tick's.
        ticked = context.scheduled_execution_time or datetime.now(UTC)
        day = (ticked.astimezone(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
        if day < spec.start_date:
            return SkipReason(f"no day since {spec.start_date} has ended yet")
        return RunRequest(run_key=day, partition_key=day, tags={"dataset": spec.name})

    return convert_the_day_that_ended


def landing_run_request(spec: DatasetSpec, day: str, url: str, fmt: str, signature: str) -> RunRequest:
    """Convert one landed day: the raw asset reads that day's folder instead of the registry's source."""
    return RunRequest(
        run_key=f"{day}:{signature}",
        partition_key=day,
        run_config={"ops": {op_name(spec, "raw_table"): {"config": {"kind": "path", "path": url, "format": fmt}}}},
        tags={"mds/landing": redact(url), "dataset": spec.name},  # the run's config keeps the URL to read
    )


def landing_sensor(spec: DatasetSpec, running: bool = False) -> SensorDefinition:
    """The sensor that starts a run for each day that lands in ``spec``'s landing folder."""

    @sensor(
        name=f"{spec.name}_landing_sensor",
        job_name=daily_job_name(spec),
        minimum_interval_seconds=60,
        default_status=sensor_status(running),
        description=f"Watches <landing>/{spec.name}/ (a folder or any fsspec URL) for <YYYY-MM-DD>/ folders of "
        "Parquet, CSV or JSON files and converts each new or changed day.",
    )
    def watch_landing(context: SensorEvaluationContext, landing: LandingZone, shard_store: ShardStore) -> SensorResult:
        return landing_requests(context, spec, landing, shard_store)

    return watch_landing


def landing_requests(
    context: SensorEvaluationContext, spec: DatasetSpec, landing: LandingZone, shard_store: ShardStore
) -> SensorResult:
    """A run request per landed day that is new or changed; the cursor remembers each day's files."""
    url = landing.url(spec.name)
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    valid_days = set(daily(spec).get_partition_keys())
    published = published_days(shard_store, spec)
    requests, skipped = [], []
    for day, (fmt, signature) in landed_days(url, landing.options() or None).items():
        previous, seen[day] = seen.get(day), signature
        if previous == signature:
            continue
        if day not in valid_days or fmt == "mixed" or (previous is None and day in published):
            skipped.append(day)  # first seen but already published: converted before the sensor ran
            continue
        if day in published:  # its files changed after it was converted: the run replaces the day
            context.log.info(f"{day}: its files changed since it was published; the run replaces it")
        requests.append(landing_run_request(spec, day, day_url(url, day), fmt, signature))
    if skipped:
        context.log.warning(
            f"landing folders skipped (not a partition day of {spec.name}, mixed formats, or "
            f"already published when first seen): {skipped}"
        )
    cursor = json.dumps(seen, sort_keys=True)  # kept on a skip too: a day seen once is not "first seen" again
    if not requests:
        return SensorResult(skip_reason=SkipReason(f"no new or changed days under {redact(url)}"), cursor=cursor)
    return SensorResult(run_requests=requests, cursor=cursor)


def published_days(shard_store: ShardStore, spec: DatasetSpec) -> set[str]:
    """The days the published version holds, none if nothing is published yet."""
    shards = shard_store.shard_set(spec.name)
    published = shards.published()
    return days_of(shards.version(published)) if published is not None else set()
