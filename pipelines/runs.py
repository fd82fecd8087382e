"""Materialise the whole graph for one day or a range of days from Python (the demo, scripts, tests).

A range runs as one run (the assets' backfill policy), like a backfill launched from the UI.
"""

from __future__ import annotations

from typing import Any

from dagster import DagsterInstance, ExecuteInProcessResult, materialize

from pipelines.assets.plan import training_plan
from pipelines.assets.smoke import loader_smoke_test
from pipelines.definitions import ASSETS

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def materialize_days(days: list[str], resources: dict[str, Any], *, full_refresh: bool = False,
                     run_config: dict[str, Any] | None = None, instance: DagsterInstance | None = None,
                     raise_on_error: bool = True) -> ExecuteInProcessResult:
    """raw → validated → shard set (+ smoke test and training plan) → published, for consecutive ``days``."""
    if not days:
        raise ValueError("materialize_days needs at least one day")
    ops = dict((run_config or {}).get("ops", {}))
    ops["shard_set"] = {"config": {**ops.get("shard_set", {}).get("config", {}), "full_refresh": full_refresh}}
    days = sorted(days)
    single = len(days) == 1
    return materialize(
        [*ASSETS, loader_smoke_test, training_plan], resources=resources, instance=instance, raise_on_error=raise_on_error,
        run_config={**(run_config or {}), "ops": ops},
        partition_key=days[0] if single else None,
        tags={} if single else {RANGE_START: days[0], RANGE_END: days[-1]})
