"""Which Delta table versions a shard-set version holds: read from the raw table's materializations of its days.

The raw step records the table, its id and the version it read (``pipelines.assets.raw.delta_metadata``); the shard
step, possibly in a later run, finds the newest raw materialization of each of its days and records, in the version's
manifest, the ``delta_lineage``-shaped source (``{"kind": "delta", "table_uri", "table_id", "versions": [first,
last]}``) that ``mds_core.versions.source_lineage`` reads back and the Delta sensor starts from. A run the sensor
started also records the plan's choice (``change``: its mode, table versions and reason, from the run's tags).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dagster import AssetExecutionContext, AssetRecordsFilter

from mds_core.versions.source_lineage import source_lineage
from pipelines.conventions import key
from pipelines.registry import DatasetSpec

if TYPE_CHECKING:
    from mds_core.versions import VersionInfo

# Raw materializations looked at per day: a day is rarely re-read more often than this between two shard runs.
RECORDS_PER_DAY = 20


def delta_source(
    context: AssetExecutionContext, spec: DatasetSpec, days: list[str], base: VersionInfo | None, mode: str
) -> dict[str, Any]:
    """The Delta source record for a shard-set version of ``days`` on ``base``; empty when no day came from Delta.

    ``versions[1]`` is the newest table version a day was read at; ``versions[0]`` the oldest, reaching back to the
    base's first when the base came from the same table and is kept (not an overwrite).

    Args:
        context: the shard step's context (its instance holds the raw materializations).
        spec: the dataset.
        days: the days the new version writes.
        base: the version it builds on (None: none).
        mode: the transaction's mode.
    """
    reads = _newest_reads(context, spec, days)
    if not reads:
        return {}
    versions = [int(read["table_version"]) for read in reads]
    table_id = str(reads[0]["table_id"])
    recorded = source_lineage(base) if base is not None and mode != "overwrite" else None
    kept = [int(recorded["versions"][0])] if recorded and recorded.get("table_id") == table_id else []
    named = {"uc_name": reads[0]["uc_name"]} if reads[0].get("uc_name") else {}
    first, last = min(versions + kept), max(versions)
    return {
        "kind": "delta",
        "table_uri": reads[0]["table_uri"],
        **named,
        "table_id": table_id,
        "versions": [first, last],
        **planned_change(context.run.tags),
    }


def planned_change(tags: Mapping[str, str]) -> dict[str, Any]:
    """``{"change": {mode, versions, reason}}`` for a run the Delta sensor started (its tags), else empty.

    Args:
        tags: the run's tags.
    """
    if "mds/delta_mode" not in tags:
        return {}
    fields = ("mode", "versions", "reason")
    return {"change": {name: tags.get(f"mds/delta_{name}", "") for name in fields}}


def _newest_reads(context: AssetExecutionContext, spec: DatasetSpec, days: list[str]) -> list[dict[str, Any]]:
    """The Delta metadata of each day's newest raw materialization (days not read from Delta left out)."""
    found = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key(spec, "raw_table"), asset_partitions=days), limit=RECORDS_PER_DAY * len(days)
    )
    newest: dict[str, dict[str, Any]] = {}
    for record in found.records:  # newest first
        materialization = record.asset_materialization
        if record.partition_key in newest or materialization is None:
            continue
        newest[record.partition_key] = {name: value.value for name, value in materialization.metadata.items()}
    return [read for _, read in sorted(newest.items()) if "table_version" in read]


def table_link(lineage: dict[str, Any]) -> dict[str, Any]:
    """Shard-set metadata linking the table versions a version holds to it (empty for other sources).

    Args:
        lineage: the lineage the version was committed with.
    """
    source = lineage.get("source", {})
    if source.get("kind") != "delta" or "versions" not in source:
        return {}
    change = source.get("change")
    return {
        "table_id": source["table_id"],
        "table_version": source["versions"][1],
        "table_versions": source["versions"],
        **({"table_change": f"{change['mode']}: {change['reason']}"} if change else {}),
    }
