"""Everything one registered dataset gets: assets, checks, jobs, schedules and sensors, under its own names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dagster import AssetChecksDefinition, AssetsDefinition, Definitions, ScheduleDefinition, SensorDefinition

from pipelines.assets.plan import build_plan_check
from pipelines.assets.published import build_published_version
from pipelines.assets.raw import build_raw_table
from pipelines.assets.shards import build_shard_set
from pipelines.assets.smoke import build_smoke_check
from pipelines.assets.validated import build_validated_table
from pipelines.automation import daily_job, daily_schedule, landing_sensor
from pipelines.delta_sensor import delta_sensor
from pipelines.operations import publish_job, vacuum_job, vacuum_schedule
from pipelines.registry import DatasetSpec


@dataclass
class DatasetDefinitions:
    """One dataset's definitions, to be merged into the code location's ``Definitions``."""

    assets: list[AssetsDefinition] = field(default_factory=list)
    checks: list[AssetChecksDefinition] = field(default_factory=list)
    jobs: list[Any] = field(default_factory=list)  # define_asset_job's unresolved jobs and JobDefinitions
    schedules: list[ScheduleDefinition] = field(default_factory=list)
    sensors: list[SensorDefinition] = field(default_factory=list)


def dataset_definitions(spec: DatasetSpec, automation: bool = False) -> DatasetDefinitions:
    """``automation``: its schedules and sensor start running (else stopped, until turned on in the UI)."""
    assets = [build_raw_table(spec), build_validated_table(spec), build_shard_set(spec), build_published_version(spec)]
    conversion, publishing, vacuuming = daily_job(spec), publish_job(spec), vacuum_job(spec)
    return DatasetDefinitions(
        assets=assets,
        checks=[build_smoke_check(spec), build_plan_check(spec)],
        jobs=[conversion, publishing, vacuuming],
        schedules=[daily_schedule(spec, automation), vacuum_schedule(spec, vacuuming, automation)],
        # A Delta source is followed by table version; every other source by its landing folder.
        sensors=[delta_sensor(spec, automation) if spec.source.kind == "delta" else landing_sensor(spec, automation)],
    )


def datasets_definitions(specs: list[DatasetSpec], automation: bool = False) -> Definitions:
    """Every dataset's definitions together (no resources: the code location adds those)."""
    parts = [dataset_definitions(spec, automation) for spec in specs]
    return Definitions(
        assets=[a for p in parts for a in p.assets],
        asset_checks=[c for p in parts for c in p.checks],
        jobs=[j for p in parts for j in p.jobs],
        schedules=[s for p in parts for s in p.schedules],
        sensors=[s for p in parts for s in p.sensors],
    )


def graph_for(spec: DatasetSpec) -> list[Any]:
    """The assets and checks ``materialize()`` needs for one dataset's whole graph.

    The same builders as the code location's (``dataset_definitions``), so an asset added there is in every run made
    here.
    """
    parts = dataset_definitions(spec)
    return [*parts.assets, *parts.checks]
