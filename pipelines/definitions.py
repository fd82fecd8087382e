"""The code location: assets, checks, the daily job, its schedule, the landing sensor and resources.

Runs use the in-process executor: every step of a run shares one Spark session (one JVM), instead of
starting a JVM per step.
"""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from pipelines.assets.plan import training_plan
from pipelines.assets.raw import raw_table
from pipelines.assets.shards import published_version, shard_set
from pipelines.assets.smoke import loader_smoke_test
from pipelines.assets.validated import validated_table
from pipelines.automation import daily_conversion, daily_schedule, landing_sensor
from pipelines.resources import resources_from_env

ASSETS = [raw_table, validated_table, shard_set, published_version]


def build_definitions(resources: dict | None = None) -> Definitions:
    """The definitions with the environment's resources, or with the given ones (tests, scripts)."""
    return Definitions(
        assets=ASSETS,
        asset_checks=[loader_smoke_test, training_plan],
        jobs=[daily_conversion],
        schedules=[daily_schedule],
        sensors=[landing_sensor],
        resources=resources_from_env() if resources is None else resources,
        executor=in_process_executor,
    )


defs = build_definitions()
