"""Operations a team runs on a dataset's shard set: publish or roll back a version, and vacuum old ones.

Each is a job per dataset the UI can launch (Launchpad config below), and vacuum also runs on a
schedule. The same operations are ``mds versions publish|rollback|vacuum`` on the command line.
"""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import datetime as dt
from typing import Literal

from dagster import Config, Failure, JobDefinition, OpExecutionContext, ScheduleDefinition, job, op
from pydantic import Field

from mds_core.storage.urls import redact
from pipelines.conventions import schedule_status
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore
from pipelines.retries import RETRY


class PublishConfig(Config):
    """The run config of the publish-or-rollback job."""

    action: Literal["publish", "rollback"] = Field(
        default="rollback",
        description="rollback: publish the version published before the current one; publish: publish `version`.",
    )
    version: int = Field(default=0, ge=0, description="The version to publish (action: publish).")


class VacuumConfig(Config):
    """The run config of the vacuum job."""

    keep_last: int = Field(
        default=0, ge=0, description="Versions to keep besides the published one; 0: the dataset's keep_versions."
    )
    grace_hours: float = Field(default=24.0, ge=0, description="Leave unfinished commits younger than this alone.")
    dry_run: bool = False


def publish_job(spec: DatasetSpec) -> JobDefinition:
    """The job that publishes a version of ``spec``'s shard set or rolls back to the previous one."""

    @op(name=f"{spec.name}_publish_or_rollback", tags={"dataset": spec.name})
    def publish_or_rollback(context: OpExecutionContext, config: PublishConfig, shard_store: ShardStore) -> int:
        shards = shard_store.shard_set(spec.name)
        before = shards.published()
        if config.action == "publish":
            if not config.version:
                raise Failure("action publish needs a version number (config `version`)", allow_retries=False)
            shards.publish(config.version)
            now = config.version
        else:
            now = shards.rollback()
        context.log.info(f"{spec.name}: published version {now} (was {before}) at {redact(shard_store.url(spec.name))}")
        context.add_output_metadata({"published": now, "previously_published": before if before is not None else -1})
        return now

    @job(
        name=f"{spec.name}_publish",
        tags={"dataset": spec.name},
        description=f"{spec.name}: publish a chosen version, or roll back to the one published before "
        "(`mds versions publish|rollback` on the command line).",
    )
    def publish_version_job() -> None:
        publish_or_rollback()

    return publish_version_job


def vacuum_job(spec: DatasetSpec) -> JobDefinition:
    """The job that removes the old versions of ``spec``'s shard set."""

    @op(name=f"{spec.name}_vacuum_versions", retry_policy=RETRY, tags={"dataset": spec.name})
    def vacuum(context: OpExecutionContext, config: VacuumConfig, shard_store: ShardStore) -> None:
        keep = config.keep_last or spec.keep_versions
        report = shard_store.shard_set(spec.name).vacuum(
            keep_last=keep, grace=dt.timedelta(hours=config.grace_hours), dry_run=config.dry_run
        )
        verb = "would delete" if config.dry_run else "deleted"
        context.log.info(
            f"{spec.name}: kept versions {report.kept_versions}; removed {report.removed_versions}; "
            f"{verb} {len(report.removed_files)} files"
        )
        context.add_output_metadata(
            {
                "kept_versions": report.kept_versions,
                "removed_versions": report.removed_versions,
                "removed_files": len(report.removed_files),
                "dry_run": config.dry_run,
            }
        )

    @job(
        name=f"{spec.name}_vacuum",
        tags={"dataset": spec.name},
        description=f"{spec.name}: delete versions beyond the newest {spec.keep_versions} (the published one is "
        "always kept) and every file no kept version needs.",
    )
    def vacuum_versions_job() -> None:
        vacuum()

    return vacuum_versions_job


def vacuum_schedule(spec: DatasetSpec, job_def: JobDefinition, running: bool = False) -> ScheduleDefinition:
    """Weekly, Sunday 03:00 UTC, away from the 01:30 daily conversion."""
    return ScheduleDefinition(
        name=f"{spec.name}_vacuum_schedule",
        job=job_def,
        cron_schedule="0 3 * * 0",
        execution_timezone="UTC",
        default_status=schedule_status(running),
    )
