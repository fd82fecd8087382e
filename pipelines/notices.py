"""Dagster notices a user can do nothing about, silenced where the definitions use those features."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import BetaWarning, PreviewWarning

# dagster-spark (dagster-pyspark's dependency) registers a component scaffolder Dagster marks as preview,
# and `dg dev` / `dg check yaml` load every registered one to check the project's component files: a
# notice about a class this project does not use. `make ui` passes this filter to dg in PYTHONWARNINGS
# (a message filter: nothing is imported at start-up), and the e2e tests start dg dev with it.
DG_PREVIEW_FILTER = "ignore:Class `SparkDeclarativePipelineScaffolder` is currently in preview"


@contextmanager
def dagster_features_we_pin() -> Iterator[None]:
    """Silence Dagster's notices that single-run backfills and partitioned checks are beta/preview.

    The project pins Dagster exactly (pyproject.toml), and a user loading the definitions can do
    nothing about these notices, so they are not shown on every load.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        yield
