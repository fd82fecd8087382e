"""Automation: the daily job, its schedule, and a sensor on the landing folder.

Schedules and sensors start stopped, so `dagster dev` launches nothing by itself; turn them on in the
UI (Automation tab) or set ``MDS_AUTOMATION=on`` to have them start running.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import hashlib
import json
import os
from pathlib import Path

from dagster import (AssetSelection, DefaultScheduleStatus, DefaultSensorStatus, RunRequest, SensorEvaluationContext,
                     SensorResult, SkipReason, build_schedule_from_partitioned_job, define_asset_job, sensor)

from pipelines.partitions import DAILY, GROUP  # the job is partitioned like its assets
from pipelines.resources import LandingZone, ShardStore, SourceSettings

daily_conversion = define_asset_job(
    "daily_conversion", selection=AssetSelection.groups(GROUP),
    description="One day (or, as a backfill, a range of days) from the raw table to a published version.")

LANDING_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}


def _automation_on() -> bool:
    return os.environ.get("MDS_AUTOMATION", "").lower() in ("1", "on", "true", "yes")


# Runs at 01:30 UTC for the day that just ended (the partitioned job's latest partition).
daily_schedule = build_schedule_from_partitioned_job(
    daily_conversion, hour_of_day=1, minute_of_hour=30,
    default_status=DefaultScheduleStatus.RUNNING if _automation_on() else DefaultScheduleStatus.STOPPED)


def landed_days(folder: Path) -> dict[str, tuple[str, str]]:
    """Day folders with files in a known format: ``{day: (format, signature of the files)}``."""
    found: dict[str, tuple[str, str]] = {}
    if not folder.is_dir():
        return found
    for day_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        files = sorted(p for p in day_dir.iterdir() if p.is_file() and p.suffix in LANDING_FORMATS)
        if not files:
            continue
        formats = {LANDING_FORMATS[p.suffix] for p in files}
        signature = hashlib.sha256(json.dumps(
            [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]).encode()).hexdigest()[:16]
        found[day_dir.name] = (formats.pop() if len(formats) == 1 else "mixed", signature)
    return found


def landing_run_request(day: str, folder: Path, fmt: str, signature: str) -> RunRequest:
    """Convert one landed day: the raw asset reads that day's folder instead of the default source."""
    return RunRequest(
        run_key=f"{day}:{signature}", partition_key=day,
        run_config={"ops": {"raw_table": {"config": {"kind": "path", "path": str(folder / day), "format": fmt}}}},
        tags={"mds/landing": str(folder / day)})


@sensor(job=daily_conversion, minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING if _automation_on() else DefaultSensorStatus.STOPPED,
        description="Watches the landing folder for <YYYY-MM-DD>/ folders of Parquet, CSV or JSON files and "
                    "converts each new day, or a changed day that is not in the shard set yet.")
def landing_sensor(context: SensorEvaluationContext, landing: LandingZone, shard_store: ShardStore,
                   source: SourceSettings) -> SensorResult | SkipReason:
    folder = landing.folder()
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    valid_days = set(DAILY.get_partition_keys())
    converted = converted_days(shard_store, source)
    requests, skipped = [], []
    for day, (fmt, signature) in landed_days(folder).items():
        if seen.get(day) == signature:
            continue
        seen[day] = signature
        if day not in valid_days or fmt == "mixed" or day in converted:
            skipped.append(day)
            continue
        requests.append(landing_run_request(day, folder, fmt, signature))
    if skipped:
        # A converted day cannot be appended twice (its rows would repeat); a full-refresh backfill
        # of every day rebuilds the shard set with the new files.
        context.log.warning(f"landing folders skipped (not a partition day, mixed formats, or already in the "
                            f"shard set's latest version): {skipped}")
    if not requests:
        return SkipReason(f"no new days under {folder}")
    return SensorResult(run_requests=requests, cursor=json.dumps(seen, sort_keys=True))


def converted_days(shard_store: ShardStore, source: SourceSettings) -> set[str]:
    """The days the shard set's latest version holds (its lineage), none if it has no version yet."""
    latest = shard_store.shard_set(source.dataset).latest()
    return set((latest.lineage or {}).get("days", [])) if latest is not None else set()
