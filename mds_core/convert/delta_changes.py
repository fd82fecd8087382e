"""What changed in a Delta table between two versions, and what an incremental run must do about it.

``plan_increment`` reads the commits after the version a shard set last recorded, straight from the log (the
protocol's ``add``/``remove``/``cdc``/``metaData``/``protocol`` actions), and classifies them:

* only files added with ``dataChange`` (appends): ``"append"``, the added files, which ``convert_added_files``
  reads alone;
* files removed with ``dataChange`` (delete, update, merge, a partition overwrite): ``"replace_partitions"`` with
  the partitions those commits touched when the table is partitioned (by the ``by`` column, the one the shard
  set replaces rows by, where the commit wrote Change Data Feed files: ``ChangeFeed``), else ``"rebuild"``;
* a ``metaData`` or ``protocol`` action (schema, partitioning, properties, features): ``"rebuild"``;
* nothing but ``dataChange=false`` rewrites (``OPTIMIZE``, compaction) or no commit at all: ``"none"``.

The plan's ``reason`` is a sentence a run records with the version it commits.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa

from mds_core.convert.delta_log import LOG, latest_delta_version, log_filesystem, read_commit
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
        by_value: the file's one value of the plan's ``by`` column: its partition value, or its statistics'
            minimum where that equals the maximum. None when the file holds several values or does not say.
    """

    path: str
    partition_values: Partition
    rows: int | None
    version: int
    by_value: str | None = None


@dataclass(frozen=True)
class IncrementalPlan:
    """What a run must do to bring a shard set from table version ``from_version`` to ``to_version``.

    Attributes:
        from_version: the table version the shard set last recorded.
        to_version: the table version the run brings it to.
        mode: ``"append"``, ``"replace_partitions"``, ``"rebuild"`` or ``"none"`` (see the module's docstring).
        added_files: the files of append-only commits (with ``"replace_partitions"``: those outside the touched
            partitions), in commit order.
        touched_partitions: with ``"replace_partitions"``, the partitions to read again whole at ``to_version``:
            partition column -> value, or ``{by: value}`` where the Change Data Feed placed the changed rows.
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
    by: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> IncrementalPlan:
    """Classify the commits ``from_version + 1`` .. ``to_version`` of a Delta table into an ``IncrementalPlan``.

    Args:
        table_uri: the table's root (a local path or a URL).
        from_version: the table version the shard set last recorded.
        to_version: the version to bring it to; None for the latest (``latest_delta_version``).
        by: the column the shard set replaces rows by (the pipelines' day column). Where the table is not
            partitioned by it, a delete or an update is placed by the values of ``by`` among the rows the
            Change Data Feed recorded for it (``delta.enableChangeDataFeed``) instead of forcing a rebuild, and
            each appended file by its statistics.
        storage_options: delta-rs's object store options.

    Raises:
        DeltaTableError: ``to_version`` before ``from_version``, a commit in between gone from the log, or a
            Change Data Feed file that cannot be read.
    """
    uri = os.fspath(table_uri)
    target = latest_delta_version(uri, storage_options) if to_version is None else to_version
    if target < from_version:
        raise DeltaTableError(f"{uri}: cannot plan from version {from_version} back to version {target}")
    fs, log = log_filesystem(uri, storage_options)
    commits = [(version, read_commit(fs, log, version, uri)) for version in range(from_version + 1, target + 1)]
    feed = ChangeFeed(fs, log.removesuffix(f"/{LOG}"), uri, by) if by else None
    return _classify(from_version, target, commits, feed)


@dataclass(frozen=True)
class ChangeFeed:
    """One column's values in the rows a commit's Change Data Feed files (its ``cdc`` actions) recorded.

    Attributes:
        fs: the table's filesystem (``log_filesystem``).
        root: the table's root on it.
        uri: the table, for messages.
        column: the column to read.
    """

    fs: Any
    root: str
    uri: str
    column: str

    def values(self, version: int, cdc: list[dict[str, Any]]) -> list[str | None]:
        """The distinct values of ``column`` (as strings; None for null) among commit ``version``'s changed rows."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        found: set[str | None] = set()
        for action in cdc:
            partition = action.get("partitionValues") or {}
            if self.column in partition:
                found.add(partition[self.column])
                continue
            try:
                path = f"{self.root}/{unquote(action['path'])}"
                column = pq.read_table(path, columns=[self.column], filesystem=self.fs).column(0)
            except (OSError, KeyError, pa.ArrowException) as err:
                raise DeltaTableError(
                    f"reading the Change Data Feed file {action['path']} of {self.uri} (version {version}) "
                    f"failed: {err}"
                ) from err
            found.update(pc.unique(column.cast(pa.string())).to_pylist())
        return sorted(found, key=lambda value: (value is None, value or ""))


def _classify(
    first: int, last: int, commits: list[tuple[int, list[dict[str, Any]]]], feed: ChangeFeed | None
) -> IncrementalPlan:
    by = feed.column if feed else None
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
            appended += [_added(add, version, by) for add in adds]
            continue
        parts = _touched(version, actions, removes + adds, feed)
        if parts is None:
            return IncrementalPlan(
                first, last, "rebuild", reason=f"commit {version} deletes or rewrites rows of an unpartitioned table"
            )
        rewrites.append(version)
        touched += [part for n, part in enumerate(parts) if part not in touched and part not in parts[:n]]
    return _plan(first, last, appended, touched, rewrites, by)


def _touched(
    version: int, actions: list[dict[str, Any]], files: list[dict[str, Any]], feed: ChangeFeed | None
) -> list[Partition] | None:
    """The partitions a deleting or rewriting commit touched; None when nothing says which (then: a rebuild).

    The removed and added files' partition values; but where the table is not partitioned by the feed's column
    and the commit wrote Change Data Feed files, ``{column: value}`` for each value among the changed rows.
    """
    parts = [dict(item.get("partitionValues") or {}) for item in files]
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    if feed is not None and cdc and not all(feed.column in part for part in parts):
        return [{feed.column: value} for value in feed.values(version, cdc)]
    return parts if all(parts) else None


def _overwrites(actions: list[dict[str, Any]]) -> bool:
    """Whether the commit is a write in overwrite mode without a predicate (Spark's and delta-rs's commitInfo)."""
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    parameters = info.get("operationParameters") or {}
    overwrite = info.get("operation") in ("WRITE", "CREATE OR REPLACE TABLE") and parameters.get("mode") == "Overwrite"
    return overwrite and not parameters.get("predicate")


def _plan(
    first: int, last: int, appended: list[AddedFile], touched: list[Partition], rewrites: list[int], by: str | None
) -> IncrementalPlan:
    span = f"versions {first + 1}..{last}" if last > first + 1 else f"version {last}"
    if touched:
        kept = [file for file in appended if not _inside(file, touched, by)]
        if any(set(part) == {by} for part in touched) and any(file.by_value is None for file in kept):
            # Rows are replaced by their value of `by`, and a kept file may hold rows of a replaced value.
            reason = f"an appended file holds several values of {by!r} (its statistics say), where rows are replaced"
            return IncrementalPlan(first, last, "rebuild", reason=f"{reason}: the shard set is rebuilt")
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


def _inside(file: AddedFile, touched: list[Partition], by: str | None) -> bool:
    """Whether ``file``'s rows are read again with the touched partitions: its partition, or its one ``by`` value."""
    if file.partition_values and file.partition_values in touched:
        return True
    return by is not None and file.by_value is not None and {by: file.by_value} in touched


def _added(add: dict[str, Any], version: int, by: str | None) -> AddedFile:
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    partition = dict(add.get("partitionValues") or {})
    return AddedFile(add["path"], partition, stats.get("numRecords"), version, _one_value(partition, stats, by))


def _one_value(partition: Partition, stats: dict[str, Any], by: str | None) -> str | None:
    """The file's one value of ``by``: its partition value, or its statistics' min where that equals the max."""
    if by is None:
        return None
    if by in partition:
        return partition[by]
    low, high = ((stats.get(bound) or {}).get(by) for bound in ("minValues", "maxValues"))
    no_nulls = (stats.get("nullCount") or {}).get(by) == 0
    return str(low) if low is not None and low == high and no_nulls else None


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
