"""What changed in a Delta table between two versions, and what an incremental run must do about it.

``plan_increment`` reads the commits after the version a shard set last recorded, straight from the log (the
protocol's ``add``/``remove``/``metaData``/``protocol`` actions), and classifies them:

* only files added with ``dataChange`` (appends): ``"append"``, the added files, which ``convert_added_files``
  reads alone;
* files removed with ``dataChange`` (delete, update, merge, a partition overwrite): ``"replace_partitions"`` with
  the partitions those commits touched when the table is partitioned, else ``"rebuild"``;
* a ``metaData`` or ``protocol`` action (schema, partitioning, properties, features): ``"rebuild"``;
* nothing but ``dataChange=false`` rewrites (``OPTIMIZE``, compaction) or no commit at all: ``"none"``.

The plan's ``reason`` is a sentence a run records with the version it commits.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from mds_core.convert.delta_log import latest_delta_version, log_filesystem, read_commit
from mds_core.errors import DeltaTableError

Mode = Literal["append", "replace_partitions", "rebuild", "none"]
Partition = dict[str, str | None]


@dataclass(frozen=True)
class AddedFile:
    """A data file an append-only commit added.

    Attributes:
        path: the file's path relative to the table's root (or absolute, as the log gives it).
        partition_values: partition column -> its value as the log writes it (a string, or None for null).
        rows: the file's row count from its statistics (None when the writer recorded none).
        version: the commit that added it.
    """

    path: str
    partition_values: Partition
    rows: int | None
    version: int


@dataclass(frozen=True)
class IncrementalPlan:
    """What a run must do to bring a shard set from table version ``from_version`` to ``to_version``.

    Attributes:
        from_version: the table version the shard set last recorded.
        to_version: the table version the run brings it to.
        mode: ``"append"``, ``"replace_partitions"``, ``"rebuild"`` or ``"none"`` (see the module's docstring).
        added_files: the files of append-only commits (with ``"replace_partitions"``: those outside the touched
            partitions), in commit order.
        touched_partitions: with ``"replace_partitions"``, the partitions to read again whole at ``to_version``.
        reason: one sentence saying why, for the run's record.
    """

    from_version: int
    to_version: int
    mode: Mode
    added_files: list[AddedFile] = field(default_factory=list)
    touched_partitions: list[Partition] = field(default_factory=list)
    reason: str = ""


def plan_increment(
    table_uri: str | os.PathLike[str],
    from_version: int,
    to_version: int | None = None,
    *,
    storage_options: dict[str, str] | None = None,
) -> IncrementalPlan:
    """Classify the commits ``from_version + 1`` .. ``to_version`` of a Delta table into an ``IncrementalPlan``.

    Args:
        table_uri: the table's root (a local path or a URL).
        from_version: the table version the shard set last recorded.
        to_version: the version to bring it to; None for the latest (``latest_delta_version``).
        storage_options: delta-rs's object store options.

    Raises:
        DeltaTableError: ``to_version`` before ``from_version``, or a commit in between gone from the log.
    """
    uri = os.fspath(table_uri)
    target = latest_delta_version(uri, storage_options) if to_version is None else to_version
    if target < from_version:
        raise DeltaTableError(f"{uri}: cannot plan from version {from_version} back to version {target}")
    fs, log = log_filesystem(uri, storage_options)
    commits = [(version, read_commit(fs, log, version, uri)) for version in range(from_version + 1, target + 1)]
    return _classify(from_version, target, commits)


def _classify(first: int, last: int, commits: list[tuple[int, list[dict[str, Any]]]]) -> IncrementalPlan:
    appended: list[AddedFile] = []
    touched: list[Partition] = []
    rewrites: list[int] = []
    for version, actions in commits:
        if changed := [name for name in ("metaData", "protocol") if any(name in a for a in actions)]:
            reason = f"commit {version} changes the table's {' and '.join(changed)} (schema, partitioning, properties or features)"
            return IncrementalPlan(first, last, "rebuild", reason=f"{reason}: the shard set is rebuilt")
        if _overwrites(actions):
            return IncrementalPlan(first, last, "rebuild", reason=f"commit {version} overwrites the whole table")
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        if not removes:
            appended += [_added(add, version) for add in adds]
            continue
        parts = [dict(item.get("partitionValues") or {}) for item in removes + adds]
        if not all(parts):
            return IncrementalPlan(
                first, last, "rebuild", reason=f"commit {version} deletes or rewrites rows of an unpartitioned table"
            )
        rewrites.append(version)
        touched += [part for n, part in enumerate(parts) if part not in touched and part not in parts[:n]]
    return _plan(first, last, appended, touched, rewrites)


def _overwrites(actions: list[dict[str, Any]]) -> bool:
    """Whether the commit is a write in overwrite mode without a predicate (Spark's and delta-rs's commitInfo)."""
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    parameters = info.get("operationParameters") or {}
    overwrite = info.get("operation") in ("WRITE", "CREATE OR REPLACE TABLE") and parameters.get("mode") == "Overwrite"
    return overwrite and not parameters.get("predicate")


def _plan(
    first: int, last: int, appended: list[AddedFile], touched: list[Partition], rewrites: list[int]
) -> IncrementalPlan:
    span = f"versions {first + 1}..{last}" if last > first + 1 else f"version {last}"
    if touched:
        kept = [file for file in appended if file.partition_values not in touched]
        reason = (
            f"commit(s) {', '.join(map(str, rewrites))} delete or rewrite rows in {len(touched)} partition(s): "
            f"those are replaced, read whole at version {last}; {len(kept)} appended file(s) elsewhere are added"
        )
        return IncrementalPlan(first, last, "replace_partitions", kept, touched, reason)
    if appended:
        reason = f"{span} only append: {len(appended)} file(s) added"
        return IncrementalPlan(first, last, "append", appended, reason=reason)
    reason = f"{span} change no rows (compaction only)" if last > first else f"version {last} is already recorded"
    return IncrementalPlan(first, last, "none", reason=reason)


def _added(add: dict[str, Any], version: int) -> AddedFile:
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    rows = stats.get("numRecords")
    return AddedFile(add["path"], dict(add.get("partitionValues") or {}), rows, version)


def partition_predicate(partitions: list[Partition]) -> str:
    """An SQL condition (DataFusion syntax) matching the rows of ``partitions``.

    Args:
        partitions: partition column -> value (a string as the log writes it, or None for null).
    """
    if not partitions:
        raise DeltaTableError("no partition to read: a predicate over no partition would match every row")
    return " OR ".join(f"({_conjunction(part)})" for part in partitions)


def _conjunction(partition: Partition) -> str:
    terms = []
    for column, value in sorted(partition.items()):
        name = '"' + column.replace('"', '""') + '"'
        terms.append(f"{name} IS NULL" if value is None else f"{name} = '{value.replace(chr(39), chr(39) * 2)}'")
    return " AND ".join(terms)
