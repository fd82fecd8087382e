"""Materialise one dataset's whole graph for one day or a range of days from Python (the demo, scripts, tests).

A range runs as one run (the assets' backfill policy), like a backfill launched from the UI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import DagsterInstance, ExecuteInProcessResult, materialize

from pipelines.conventions import op_name
from pipelines.factory import graph_for
from pipelines.registry import DatasetSpec

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def materialize_days(
    spec: DatasetSpec,
    days: Sequence[str],
    resources: dict[str, Any],
    *,
    mode: str = "auto",
    run_config: dict[str, Any] | None = None,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = True,
    selection: Any = None,
    tags: Mapping[str, str] | None = None,
) -> ExecuteInProcessResult:
    """Run raw → validated → shard set (+ smoke test and training plan) → published, for consecutive ``days``.

    ``tags`` are added to the run's (a sensor's run request carries its reason in them).
    """
    if not days:
        raise ValueError("materialize_days needs at least one day")
    ops = dict((run_config or {}).get("ops", {}))
    shards_op = op_name(spec, "shard_set")
    if selection is None:  # config for a step outside the selection is refused
        ops[shards_op] = {"config": {**ops.get(shards_op, {}).get("config", {}), "mode": mode}}
    days = sorted(days)
    # The partition goes in as a tag: materialize(partition_key=) refuses a selection of checks only.
    partition = {"dagster/partition": days[0]} if len(days) == 1 else {RANGE_START: days[0], RANGE_END: days[-1]}
    return materialize(
        graph_for(spec),
        resources=resources,
        instance=instance,
        raise_on_error=raise_on_error,
        run_config={**(run_config or {}), "ops": ops},
        tags={**(tags or {}), **partition},
        selection=selection,
    )
