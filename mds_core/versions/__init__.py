"""Versioned MDS shard sets: immutable versions, append, time travel, diff, publication and retention.

``ShardSet(root)`` is the entry point; see ``docs/versions.md`` for the layout on the store and the
guarantees.
"""

from mds_core.versions.manifest import VacuumReport, VersionDiff, VersionInfo
from mds_core.versions.shard_set import ShardSet, resolve_version
from mds_core.versions.transaction import Transaction

__all__ = ["ShardSet", "Transaction", "VacuumReport", "VersionDiff", "VersionInfo", "resolve_version"]
