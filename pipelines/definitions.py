"""The code location: the dataset registry component (``pipelines/defs/datasets/defs.yaml``) with its
assets, checks, jobs, schedules and sensors, and the shared resources.

``defs`` is loaded when a code server, ``dg`` or a test asks for it, not when this module is imported:
only then is the environment read (which resource settings are bound to variables, and the registry
component's templates). Runs use the in-process executor: every step of a run shares one Spark session
(one JVM), instead of starting a JVM per step.
"""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from typing import Any

from dagster import ComponentTree, Definitions, definitions, in_process_executor

from pipelines.factory import datasets_definitions
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import default_resources

PACKAGE = Path(__file__).resolve().parent


def component_definitions() -> Definitions:
    """What ``pipelines/defs`` declares. Built from the package itself, not from pyproject.toml's
    [tool.dg] settings (which ``dg`` reads in a checkout), so an installed wheel loads the same.
    Loading components marks them with code references, a beta feature Dagster warns about, and
    Dagster's YAML loader calls a pydantic function pydantic marks deprecated: neither is ours to fix."""
    with dagster_features_we_pin(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`parse_obj_as` is deprecated", category=DeprecationWarning)
        return ComponentTree(
            defs_module=importlib.import_module("pipelines.defs"),
            project_root=PACKAGE.parent,
            code_location_name="pipelines",
        ).build_defs()


@definitions
def defs() -> Definitions:
    """The code location as deployed: the components and the resources bound to the environment."""
    resources = Definitions(resources=default_resources(os.environ), executor=in_process_executor)
    merged = Definitions.merge(component_definitions(), resources)
    with dagster_features_we_pin():
        merged.resolve_asset_graph()  # resolved once (Dagster caches it), its beta notices silenced
    return merged


def build_definitions(specs: list[DatasetSpec], resources: dict[str, Any], automation: bool = False) -> Definitions:
    """The given datasets with the given resources (tests, scripts)."""
    return Definitions.merge(
        datasets_definitions(specs, automation), Definitions(resources=resources, executor=in_process_executor)
    )
