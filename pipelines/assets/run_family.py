"""Which version of the shard set this run wrote, where "this run" includes the runs it re-executes.

"Re-execute from failure" starts a new run that skips the steps that succeeded; their versions and
check verdicts belong to the parent run. Accepting only this run's own id would make a re-executed
check or publication fail, so these helpers accept the whole family.

The shard set answers, not Dagster's event log: ``shard_set`` records its run's id in each version's
lineage (``RUN_ID``), so a run finds its own version even when a run of another day committed a newer
one in the meantime.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from dagster import AssetCheckExecutionContext, AssetExecutionContext

from mds_core.versions.numbering import CLOCK_SKEW

if TYPE_CHECKING:
    from mds_core.versions import ShardSet, VersionInfo
    from pipelines.registry import DatasetSpec
    from pipelines.resources import ShardStore

Context = AssetCheckExecutionContext | AssetExecutionContext
RUN_ID = "dagster_run_id"  # the lineage entry naming the run that wrote a version


def run_family(context: Context) -> set[str]:
    """This run's id and those of the runs it re-executes (parent, grandparent, ... root)."""
    ids, run = {context.run.run_id}, context.run
    while run is not None and run.parent_run_id and run.parent_run_id not in ids:
        ids.add(run.parent_run_id)
        run = context.instance.get_run_by_id(run.parent_run_id)
    return ids


def family_began(context: Context, runs: set[str]) -> dt.datetime | None:
    """When the family's first run was created, less the writers' clock skew: no version older is theirs."""
    records = [context.instance.get_run_record_by_id(run_id) for run_id in runs]
    created: list[dt.datetime] = [record.create_timestamp for record in records if record is not None]
    if not created:
        return None
    first = min(created)
    return (first if first.tzinfo else first.replace(tzinfo=dt.UTC)) - CLOCK_SKEW


def version_written_by(shards: ShardSet, runs: set[str], since: dt.datetime | None = None) -> VersionInfo | None:
    """The newest version whose lineage names one of ``runs``; None if none of them committed one.

    The versions are read from the newest back (usually one manifest: the run's own), not listed: a daily
    set's history grows by one version a day. ``since`` ends the walk at the versions made before it.
    """
    return next((info for info in shards.newest_first(since) if info.lineage.get(RUN_ID) in runs), None)


def version_to_check(context: AssetCheckExecutionContext, spec: DatasetSpec, store: ShardStore) -> int | None:
    """The version this run wrote; executed on its own, the latest (None: the set has no version)."""
    shards, runs = store.shard_set(spec.name), run_family(context)
    written = version_written_by(shards, runs, family_began(context, runs)) or shards.latest()
    return written.number if written is not None else None
