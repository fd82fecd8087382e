"""A dataset as a Dagster component: ``pipelines/defs/<dataset>/defs.yaml`` is one instance each.

Its attributes are the dataset's ``DatasetSpec`` fields (``pipelines.registry``), so ``dg check yaml``
checks every dataset's settings, and ``dg list defs`` shows each dataset's assets, checks, jobs,
schedules and sensor under its own file (``pipelines.factory`` builds them).
"""

# No `from __future__ import annotations`: Dagster resolves the model's fields from their annotations.
from dagster import Component, ComponentLoadContext, Definitions, Resolvable
from pydantic import Field

from pipelines.factory import datasets_definitions
from pipelines.registry import COMPONENT_ATTRIBUTES, DatasetSpec, Source

ON = ("1", "on", "true", "yes")


def switched_on(value: str) -> bool:
    """``MDS_AUTOMATION``'s reading: on, 1, true or yes (any case) start the schedules and sensors."""
    return value.strip().lower() in ON


class DatasetSource(Source, Resolvable):
    """A dataset's ``source`` as a component attribute (Resolvable, so the component's schema has its fields)."""


class Dataset(Component, Resolvable, DatasetSpec):
    """One dataset, with its own graph, jobs, schedules and sensor: the ``DatasetSpec`` fields, plus ``automation``."""

    source: DatasetSource = Field(default_factory=DatasetSource)
    automation: str = Field(
        default="", description="on: schedules and sensors start running; empty or off: they start stopped."
    )

    def spec(self) -> DatasetSpec:
        """The dataset's settings, without what the component adds (``COMPONENT_ATTRIBUTES``)."""
        return DatasetSpec(**self.model_dump(exclude=set(COMPONENT_ATTRIBUTES)))

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        """The dataset's assets, checks, jobs, schedules and sensor."""
        return datasets_definitions([self.spec()], automation=switched_on(self.automation))
