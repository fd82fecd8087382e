"""The code location: every dataset in the registry (pipelines/datasets.yaml or $MDS_DATASETS) with its
assets, checks, jobs, schedules and sensors, and the shared resources.

Runs use the in-process executor: every step of a run shares one Spark session (one JVM), instead of
starting a JVM per step.
"""

from __future__ import annotations

from typing import Any

from dagster import Definitions, in_process_executor

from pipelines.factory import dataset_definitions
from pipelines.registry import DatasetSpec, load_registry
from pipelines.resources import resources_from_env


def build_definitions(specs: list[DatasetSpec] | None = None, resources: dict[str, Any] | None = None) -> Definitions:
    """The registry's datasets with the environment's resources, or the given ones (tests, scripts)."""
    parts = [dataset_definitions(spec) for spec in (load_registry() if specs is None else specs)]
    return Definitions(
        assets=[a for p in parts for a in p.assets],
        asset_checks=[c for p in parts for c in p.checks],
        jobs=[j for p in parts for j in p.jobs],
        schedules=[s for p in parts for s in p.schedules],
        sensors=[s for p in parts for s in p.sensors],
        resources=resources_from_env() if resources is None else resources,
        executor=in_process_executor,
    )


defs = build_definitions()
