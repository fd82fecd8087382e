"""The code location: the datasets with their assets, checks, jobs, schedules and sensors, and the shared resources.

The datasets are the package's components (``pipelines/defs/<dataset>/defs.yaml``), or, when
``$MDS_DATASETS`` names a registry file, that file's datasets instead: the one way a deployment declares
its own (docs/pipelines.md), with ``$MDS_AUTOMATION`` read here as the components' template reads it.

``defs`` is loaded when a code server, ``dg`` or a test asks for it, not when this module is imported:
only then is the environment read (which resource settings are bound to variables, the registry file,
and the components' templates). Runs use the in-process executor: every step of a run shares one Spark
session (one JVM), instead of starting a JVM per step.
"""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from typing import Any

from dagster import ComponentTree, Definitions, definitions, in_process_executor

from pipelines.components import switched_on
from pipelines.factory import datasets_definitions
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec, load_registry, registry_path
from pipelines.resources import default_resources

PACKAGE = Path(__file__).resolve().parent


def component_definitions() -> Definitions:
    """What ``pipelines/defs`` declares.

    Built from the package itself, not from pyproject.toml's [tool.dg] settings (which ``dg`` reads in a checkout), so
    an installed wheel loads the same. Loading components marks them with code references, a beta feature Dagster warns
    about, and Dagster's YAML loader calls a pydantic function pydantic marks deprecated: neither is ours to fix.
    """
    with dagster_features_we_pin(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`parse_obj_as` is deprecated", category=DeprecationWarning)
        return ComponentTree(
            defs_module=importlib.import_module("pipelines.defs"),
            project_root=PACKAGE.parent,
            code_location_name="pipelines",
        ).build_defs()


def dataset_definitions() -> Definitions:
    """The registry file ``$MDS_DATASETS`` names, when set; else the package's dataset components."""
    registry = registry_path(os.environ)
    if registry is None:
        return component_definitions()
    with dagster_features_we_pin():
        return datasets_definitions(load_registry(registry), switched_on(os.environ.get("MDS_AUTOMATION", "")))


@definitions
def defs() -> Definitions:
    """The code location as deployed: the datasets and the resources bound to the environment."""
    resources = Definitions(resources=default_resources(os.environ), executor=in_process_executor)
    merged = Definitions.merge(dataset_definitions(), resources)
    with dagster_features_we_pin():
        merged.resolve_asset_graph()  # resolved once (Dagster caches it), its beta notices silenced
    return merged


def build_definitions(specs: list[DatasetSpec], resources: dict[str, Any], automation: bool = False) -> Definitions:
    """The given datasets with the given resources (tests, scripts)."""
    return Definitions.merge(
        datasets_definitions(specs, automation), Definitions(resources=resources, executor=in_process_executor)
    )
