"""Versioned MDS shard sets: immutable versions, append, time travel, diff and retention.

A shard-set root (a local path or any URL ``open_store`` accepts) holds::

    index.json                         the published version's index: plain MDS readers read it
    data/<txn>/...                     shards, each written once by one transaction, never changed
    _versions/00000003.<txn>.index.json    version 3's complete index (basenames relative to the root)
    _versions/00000003.json            version 3's manifest, the commit marker, written last
    _versions/published.json           {"version": N}: what training code resolves

A version becomes visible only when its manifest exists. The manifest is created with an
exclusive create (a hard link locally, ``If-None-Match: *`` on object stores), so when two
writers commit the same version number exactly one wins; the other gets ``VersionConflictError``
and its shards stay where they are, to be committed again on top of the winner.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from mds_core.errors import ConfigurationError, VersionConflictError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_merged_index, parse_index
from mds_core.storage.remote import RemoteStore, open_store

VERSIONS = "_versions"
DATA = "data"
PUBLISHED = f"{VERSIONS}/published.json"
MODES = ("append", "overwrite")


@dataclass(frozen=True)
class VersionInfo:
    """One committed version, as its manifest records it."""

    version: int
    parent: int | None
    created: str  # ISO 8601, UTC
    mode: str
    transaction: str
    index: str  # the version's index file, relative to the root
    rows: int
    shards: int
    raw_bytes: int
    stored_bytes: int  # what the files take in the store (compressed where compressed)
    new_shards: int
    columns: dict[str, str]
    fingerprint: str
    writer: dict[str, Any]
    lineage: dict[str, Any] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return self.version

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VersionDiff:
    """What changed from version ``old`` to version ``new``."""

    old: int
    new: int
    added_shards: list[str]
    removed_shards: list[str]
    added_rows: int
    removed_rows: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VacuumReport:
    kept_versions: list[int]
    removed_versions: list[int]
    removed_files: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ShardSet:
    """The versions under ``root``. Every operation reads the store afresh: there is no cached state."""

    def __init__(self, root: str, *, storage_options: dict[str, Any] | None = None, retry: int = 3) -> None:
        self.store: RemoteStore = open_store(root, retry=retry, timeout=None, storage_options=storage_options)

    def __repr__(self) -> str:
        return f"ShardSet({self.store.url!r})"

    # ---------------------------------------------------------------------------------------------
    # reading

    def versions(self) -> list[VersionInfo]:
        """Every committed version, oldest first."""
        names = [n for n in self.store.list(VERSIONS) if _is_manifest(n)]
        return sorted((self._manifest(n) for n in names), key=lambda v: v.version)

    def latest(self) -> VersionInfo | None:
        found = self.versions()
        return found[-1] if found else None

    def version(self, number: int) -> VersionInfo:
        """The manifest of version ``number`` (``mds versions show``)."""
        name = _manifest_name(number)
        if not self.store.exists(name):
            known = [v.version for v in self.versions()]
            raise ConfigurationError(f"{self.store.url}: no version {number}; versions here: {known or 'none'}")
        return self._manifest(name)

    def published(self) -> int | None:
        """The version training code resolves by default (the root's ``index.json``), or None."""
        if not self.store.exists(PUBLISHED):
            return None
        return int(json.loads(self.store.read_bytes(PUBLISHED))["version"])

    def index_bytes(self, number: int) -> bytes:
        """Version ``number``'s ``index.json`` text; its basenames are relative to the root."""
        return self.store.read_bytes(self.version(number).index)

    def shards(self, number: int) -> list[ShardInfo]:
        return parse_index(self.index_bytes(number), f"{self.store.url} version {number}")

    def diff(self, old: int, new: int) -> VersionDiff:
        """Shards and rows added and removed between two versions."""
        before = {s.raw_data.basename: s.samples for s in self.shards(old)}
        after = {s.raw_data.basename: s.samples for s in self.shards(new)}
        added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
        return VersionDiff(old, new, added, removed, sum(after[b] for b in added), sum(before[b] for b in removed))

    # ---------------------------------------------------------------------------------------------
    # writing

    def transaction(self, mode: str = "append", lineage: dict[str, Any] | None = None,
                    publish: bool = True) -> "Transaction":
        """``with shard_set.transaction("append") as tx:`` write an MDS dataset to ``tx.out``; commit on exit."""
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {MODES}, got {mode!r}")
        return Transaction(self, mode, dict(lineage or {}), publish)

    def commit(self, transaction: str, mode: str, lineage: dict[str, Any] | None = None,
               publish: bool = True, parent: int | None | str = "latest") -> VersionInfo:
        """Commit the MDS dataset written to ``data/<transaction>/`` as the version after ``parent``.

        ``parent`` is the version the writer started from (``"latest"``: whatever is latest now).
        Raises ``VersionConflictError`` if another writer committed after ``parent`` first; the
        written shards are kept, so calling ``commit`` again puts them on top of the winner.
        """
        folder = f"{DATA}/{transaction}"
        written = parse_index(self.store.read_bytes(f"{folder}/{INDEX_BASENAME}"), self.store.url_of(folder))
        new = [shard.with_prefix(folder) for shard in written]
        base_info = self.latest() if parent == "latest" else self.version(int(parent)) if parent else None
        base = self.shards(base_info.version) if base_info is not None and mode == "append" else []
        shards = base + new
        if not shards:
            raise ConfigurationError(f"{self.store.url_of(folder)}: the transaction wrote no shards")
        number = (base_info.version + 1) if base_info is not None else 1
        index_text = dumps_merged_index(shards).encode("utf-8")
        index_name = f"{VERSIONS}/{number:08d}.{transaction}.index.json"
        self.store.write_bytes(index_name, index_text)  # invisible until the manifest exists
        info = _describe(number, base_info, mode, transaction, index_name, shards, len(new), index_text, lineage or {})
        if not self.store.write_if_absent(_manifest_name(number), json.dumps(info.to_json(), indent=1).encode()):
            self.store.delete(index_name)
            raise VersionConflictError(
                f"{self.store.url}: version {number} was committed by another writer first. Nothing was "
                f"published; this transaction's shards are kept in {self.store.url_of(folder)}: call "
                f"ShardSet.commit({transaction!r}, {mode!r}) to commit them on top of version {number}"
            )
        if publish:
            self.publish(number)
        return info

    def publish(self, number: int) -> None:
        """Point the root's ``index.json`` (what plain readers and ``version=None`` read) at ``number``."""
        data = self.index_bytes(number)
        self.store.write_bytes(INDEX_BASENAME, data)
        self.store.write_bytes(PUBLISHED, json.dumps({"version": number}).encode())

    # ---------------------------------------------------------------------------------------------
    # retention

    def vacuum(self, keep_last: int | None = None, newer_than: dt.datetime | None = None,
               grace: dt.timedelta = dt.timedelta(hours=1), dry_run: bool = False) -> VacuumReport:
        """Delete versions outside the retention and every file no kept version needs.

        Kept: the last ``keep_last`` versions, those created after ``newer_than``, and the published
        one (with neither limit, every version is kept and only debris goes). Files of unfinished
        transactions (no manifest) are debris once older than ``grace``, so a commit in progress is
        never removed from under its writer.
        """
        versions = self.versions()
        keep = _retained(versions, keep_last, newer_than, self.published())
        needed: set[str] = {INDEX_BASENAME, PUBLISHED}
        for info in versions:
            if info.version in keep:
                needed |= {_manifest_name(info.version), info.index}
                needed |= {f.basename for s in self.shards(info.version) for f in (s.raw_data, s.zip_data) if f}
        cutoff = _now() - grace
        committed = {v.transaction for v in versions} | {v.index for v in versions}
        doomed = [name for name in self.store.list()
                  if name not in needed and _removable(self.store, name, committed, cutoff)]
        # Manifests go first: a version disappears before any of its files do.
        doomed.sort(key=lambda n: (not _is_manifest(n), n))
        if not dry_run:
            for name in doomed:
                self.store.delete(name)
        removed = sorted(v.version for v in versions if v.version not in keep)
        return VacuumReport(sorted(keep), removed, doomed)

    def _manifest(self, name: str) -> VersionInfo:
        obj = json.loads(self.store.read_bytes(name))
        return VersionInfo(**obj)


class Transaction:
    """A version being written: shards go to ``out``; leaving the ``with`` block commits them."""

    def __init__(self, shard_set: ShardSet, mode: str, lineage: dict[str, Any], publish: bool) -> None:
        self.shard_set, self.mode, self.lineage, self.publish = shard_set, mode, lineage, publish
        stamp = _now().strftime("%Y%m%dT%H%M%S")
        self.id = f"{stamp}-{uuid.uuid4().hex[:8]}"
        self.out = shard_set.store.url_of(f"{DATA}/{self.id}")
        latest = shard_set.latest()
        self.parent = latest.version if latest is not None else None  # what this writer builds on
        self.version: VersionInfo | None = None

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None:
            self.version = self.shard_set.commit(self.id, self.mode, self.lineage, self.publish, parent=self.parent)
        # On an exception nothing is committed; the partial files are debris for vacuum().


def resolve_version_index(root: str, version: int, storage_options: dict[str, Any] | None = None) -> str:
    """The path of version ``version``'s index relative to ``root`` (for ``Stream(version=...)``)."""
    return ShardSet(root, storage_options=storage_options).version(version).index


# ------------------------------------------------------------------------------------------------


def _manifest_name(number: int) -> str:
    return f"{VERSIONS}/{number:08d}.json"


def _is_manifest(name: str) -> bool:
    base = posixpath.basename(name)
    return name.startswith(f"{VERSIONS}/") and base.endswith(".json") and base[:-5].isdigit()


def _removable(store: RemoteStore, name: str, committed: set[str], cutoff: dt.datetime) -> bool:
    """Unneeded files of committed versions go at once; anything else (an unfinished commit's files)
    only once older than the grace period, so a commit in progress is never removed from its writer."""
    parts = name.split("/")
    if _is_manifest(name) or name in committed or (parts[0] == DATA and len(parts) > 2 and parts[1] in committed):
        return True
    return _modified(store, name) < cutoff


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _modified(store: RemoteStore, name: str) -> dt.datetime:
    info = store.fs.info(f"{store.path.rstrip('/')}/{name}")
    stamp = info.get("LastModified") or info.get("mtime") or info.get("created")
    if isinstance(stamp, dt.datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromtimestamp(float(stamp or 0), dt.timezone.utc)


def _retained(versions: list[VersionInfo], keep_last: int | None, newer_than: dt.datetime | None,
              published: int | None) -> set[int]:
    if keep_last is None and newer_than is None:
        return {v.version for v in versions}
    if keep_last is not None and keep_last < 1:
        raise ConfigurationError(f"keep_last must be >= 1, got {keep_last}")
    keep = {v.version for v in versions[-keep_last:]} if keep_last else set()
    if newer_than is not None:
        keep |= {v.version for v in versions if dt.datetime.fromisoformat(v.created) > newer_than}
    if published is not None:
        keep.add(published)
    return keep


def _describe(number: int, parent: VersionInfo | None, mode: str, transaction: str, index_name: str,
              shards: list[ShardInfo], new: int, index_text: bytes, lineage: dict[str, Any]) -> VersionInfo:
    first = shards[0]
    return VersionInfo(
        version=number, parent=parent.version if parent else None, created=_now().isoformat(), mode=mode,
        transaction=transaction, index=index_name, rows=sum(s.samples for s in shards), shards=len(shards),
        raw_bytes=sum(s.raw_data.bytes for s in shards),
        stored_bytes=sum((s.zip_data or s.raw_data).bytes for s in shards), new_shards=new,
        columns=dict(zip(first.column_names, first.column_encodings)),
        fingerprint=hashlib.sha256(index_text).hexdigest()[:16],
        writer={"compression": first.compression, "hashes": first.hashes, "size_limit": first.size_limit},
        lineage=lineage,
    )
