"""Everything one registered dataset gets: assets, checks, jobs, schedules and sensors, under its own names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.assets.plan import build_plan_check
from pipelines.assets.published import build_published_version
from pipelines.assets.raw import build_raw_table
from pipelines.assets.shards import build_shard_set
from pipelines.assets.smoke import build_smoke_check
from pipelines.assets.validated import build_validated_table
from pipelines.automation import daily_job, daily_schedule, landing_sensor
from pipelines.operations import publish_job, vacuum_job, vacuum_schedule
from pipelines.registry import DatasetSpec


@dataclass
class DatasetDefinitions:
    """One dataset's definitions, to be merged into the code location's ``Definitions``."""

    assets: list[Any] = field(default_factory=list)
    checks: list[Any] = field(default_factory=list)
    jobs: list[Any] = field(default_factory=list)
    schedules: list[Any] = field(default_factory=list)
    sensors: list[Any] = field(default_factory=list)


def dataset_definitions(spec: DatasetSpec) -> DatasetDefinitions:
    assets = [build_raw_table(spec), build_validated_table(spec), build_shard_set(spec), build_published_version(spec)]
    conversion, publishing, vacuuming = daily_job(spec), publish_job(spec), vacuum_job(spec)
    return DatasetDefinitions(
        assets=assets,
        checks=[build_smoke_check(spec), build_plan_check(spec)],
        jobs=[conversion, publishing, vacuuming],
        schedules=[daily_schedule(spec, conversion), vacuum_schedule(spec, vacuuming)],
        sensors=[landing_sensor(spec, conversion)],
    )


def graph_for(spec: DatasetSpec) -> list[Any]:
    """The assets and checks ``materialize()`` needs for one dataset's whole graph."""
    return [
        build_raw_table(spec),
        build_validated_table(spec),
        build_shard_set(spec),
        build_published_version(spec),
        build_smoke_check(spec),
        build_plan_check(spec),
    ]
