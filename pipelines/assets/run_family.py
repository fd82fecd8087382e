"""What earlier steps of this run wrote, where "this run" includes the runs it re-executes.

"Re-execute from failure" starts a new run that skips the steps that succeeded; their
materialisations and check results belong to the parent run. Reading only this run's events would
make a re-executed check or publication fail, so these helpers accept the whole family.
"""

from __future__ import annotations

from typing import Any

from dagster import AssetCheckExecutionContext, AssetExecutionContext, AssetKey

Context = AssetCheckExecutionContext | AssetExecutionContext


def run_family(context: Context) -> set[str]:
    """This run's id and those of the runs it re-executes (parent, grandparent, ... root)."""
    ids, run = {context.run.run_id}, context.run
    while run is not None and run.parent_run_id and run.parent_run_id not in ids:
        ids.add(run.parent_run_id)
        run = context.instance.get_run_by_id(run.parent_run_id)
    return ids


def written_in_this_run(context: Context, asset: AssetKey) -> dict[str, Any] | None:
    """The metadata ``asset`` recorded in this run (or the run it re-executes), None if it did not run."""
    event = context.instance.get_latest_materialization_event(asset)
    if event is None or event.asset_materialization is None or event.run_id not in run_family(context):
        return None
    return {name: value.value for name, value in event.asset_materialization.metadata.items()}
