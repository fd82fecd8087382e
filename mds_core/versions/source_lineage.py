"""The source lineage a shard-set version records, read back: which table, and which table versions.

A run that converts a Delta table commits its shard-set version with ``lineage={"source": {...}}``
(``mds_core.convert.delta_increment.delta_lineage`` builds it). An incremental run starts from the last table
version the shard set recorded: ``recorded_table_version``.
"""

from __future__ import annotations

from typing import Any

from mds_core.versions.manifest import VersionInfo
from mds_core.versions.shard_set import ShardSet


def source_lineage(info: VersionInfo) -> dict[str, Any] | None:
    """The Delta source record of a shard-set version, or None when it was not made from a Delta table.

    Args:
        info: a version's manifest (``ShardSet.latest()``, ``ShardSet.version(n)``).
    """
    source = info.lineage.get("source")
    if not isinstance(source, dict) or source.get("kind") != "delta":
        return None
    return source


def recorded_table_version(shard_set: ShardSet) -> int | None:
    """The last table version the shard set's newest version recorded (None: no version, or none from Delta).

    Args:
        shard_set: the shard set an incremental run appends to.
    """
    latest = shard_set.latest()
    source = source_lineage(latest) if latest is not None else None
    return int(source["versions"][1]) if source is not None else None
