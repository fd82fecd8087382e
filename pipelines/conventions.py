"""What every asset of a dataset carries.

Its key under the dataset's prefix, its step name, its daily partitions, the backfill policy that makes a range one run,
and its group, owners, tags, kinds and code version; and the status its schedules and sensor start with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypedDict

from dagster import (
    AssetKey,
    AssetSpec,
    BackfillPolicy,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    DefaultSensorStatus,
)

from pipelines.registry import DatasetSpec

# Bump when an asset's logic changes what it writes: Dagster then marks materialisations as stale.
LOGIC_VERSION = "2"


def daily(spec: DatasetSpec) -> DailyPartitionsDefinition:
    """Daily partitions from the dataset's start date."""
    return DailyPartitionsDefinition(start_date=spec.start_date)


def key(spec: DatasetSpec, asset: str) -> AssetKey:
    """``<dataset>/<asset>``: every dataset's assets under its own prefix."""
    return AssetKey([spec.name, asset])


def schedule_status(running: bool) -> DefaultScheduleStatus:
    """Schedules start stopped unless the deployment turned automation on (``MDS_AUTOMATION``)."""
    return DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED


def sensor_status(running: bool) -> DefaultSensorStatus:
    """Sensors start stopped unless the deployment turned automation on (``MDS_AUTOMATION``)."""
    return DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED


def op_name(spec: DatasetSpec, asset: str) -> str:
    """The step (and run-config ``ops:`` key) of a prefixed asset: ``<dataset>__<asset>``."""
    return f"{spec.name}__{asset}"


class AssetConventions(TypedDict):
    """The ``@asset`` keyword arguments ``conventions`` gives (named, so ``@asset(**...)`` type-checks)."""

    key_prefix: list[str]
    group_name: str
    owners: list[str]
    tags: dict[str, str]
    kinds: set[str]
    code_version: str
    partitions_def: DailyPartitionsDefinition
    backfill_policy: BackfillPolicy


def conventions(
    spec: DatasetSpec, layer: str, kinds: set[str], settings: dict[str, Any] | None = None
) -> AssetConventions:
    """The ``@asset`` arguments every asset of a dataset shares.

    ``code_version`` covers the asset's logic and the registry settings it uses, so changing a
    dataset's compression, say, shows its shard sets as changed code in the UI.
    """
    fingerprint = hashlib.sha256(json.dumps(settings or {}, sort_keys=True).encode()).hexdigest()[:8]
    return AssetConventions(
        key_prefix=[spec.name],
        group_name=spec.name,
        owners=list(spec.owners),
        tags={**spec.tags, "dataset": spec.name, "layer": layer},
        kinds=kinds,
        code_version=f"{LOGIC_VERSION}.{fingerprint}",
        partitions_def=daily(spec),
        backfill_policy=BackfillPolicy.single_run(),  # a backfill of many days reads and commits once
    )


def asset_spec(
    spec: DatasetSpec,
    asset: str,
    layer: str,
    kinds: set[str],
    description: str,
    deps: list[AssetKey],
    settings: dict[str, Any] | None = None,
) -> AssetSpec:
    """One asset of a ``multi_asset`` with the conventions above.

    The decorator carries the partitions and the backfill policy.
    """
    shared = conventions(spec, layer, kinds, settings)
    return AssetSpec(
        key(spec, asset),
        deps=deps,
        description=description,
        group_name=shared["group_name"],
        owners=shared["owners"],
        tags=shared["tags"],
        kinds=kinds,
        code_version=shared["code_version"],
    )
