"""The dataset registry as a Dagster component: ``pipelines/defs/datasets/defs.yaml`` is its instance.

Each dataset of the registry file gets its assets, checks, jobs, schedules and landing sensor
(``pipelines.factory``). ``dg check yaml`` checks the instance's attributes against this model and
``dg list defs`` lists what it builds.
"""

# No `from __future__ import annotations`: Dagster resolves the model's fields from their annotations.
from pathlib import Path

from dagster import Component, ComponentLoadContext, Definitions, Model, Resolvable
from pydantic import Field

from pipelines.factory import datasets_definitions
from pipelines.registry import DEFAULT_REGISTRY, load_registry

ON = ("1", "on", "true", "yes")


class DatasetRegistry(Component, Resolvable, Model):
    """The datasets of a registry file, each with its own graph, jobs, schedules and sensor."""

    registry: str = Field(default="", description="The registry YAML file; empty: pipelines/datasets.yaml.")
    automation: str = Field(
        default="", description="on: schedules and sensors start running; empty or off: they start stopped."
    )

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        specs = load_registry(Path(self.registry) if self.registry else DEFAULT_REGISTRY)
        return datasets_definitions(specs, automation=self.automation.strip().lower() in ON)
