"""Dagster notices a user can do nothing about, silenced where the definitions use those features.

Each is silenced by its message, not by its category: a beta or preview notice about any other
feature (one a change here starts using, say) still shows.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# The beta and preview features the definitions use on purpose, as Dagster's notices name them.
PINNED_FEATURES = (
    "Parameter `backfill_policy` of function `asset`",  # a backfill of many days is one run
    "Specifying a partitions_def on an AssetCheckSpec",  # checks partitioned like their asset
    # What Dagster itself does while building those assets and the sensors:
    "Parameter `execution_type` of function `AssetsDefinition.__init__`",
    "Parameter `owners` of initializer `SensorDefinition.__init__`",
    # What the component loader does while reading pipelines/defs (it marks definitions with their file):
    "Class `CodeReferencesMetadataValue`",
    "Class `LocalFileCodeReference`",
    "Function `load_definitions_from_module`",
    "Function `load_definitions_from_modules`",
)
NOTICE = "{feature} is currently in (beta|preview)"


@contextmanager
def dagster_features_we_pin() -> Iterator[None]:
    """Silence Dagster's beta and preview notices about ``PINNED_FEATURES``.

    The project pins Dagster exactly (pyproject.toml), and a user loading the definitions can do
    nothing about these notices, so they are not shown on every load.
    """
    with warnings.catch_warnings():
        for feature in PINNED_FEATURES:
            warnings.filterwarnings("ignore", message=NOTICE.format(feature=re.escape(feature)))
        yield
