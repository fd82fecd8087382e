"""``ShardSet``: the versions under one root: read them, commit new ones, publish one, vacuum the rest.

A version becomes visible only when its manifest exists (``mds_core.versions.manifest`` describes the
layout). The manifest is created with an exclusive create (a hard link locally, ``If-None-Match: *``
on object stores), so when two writers commit the same version number exactly one wins; the other
gets ``VersionConflictError`` and its shards stay where they are, to be committed again on top of
the winner.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import uuid
from typing import Any, Iterable

from mds_core.errors import ConfigurationError, StoreFileNotFoundError, VersionConflictError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, check_same_columns, dumps_merged_index, parse_index
from mds_core.storage.exclusive import require_exclusive_create
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.versions.manifest import (DATA, MODES, PUBLISHED, VERSIONS, VacuumReport, VersionDiff, VersionInfo,
                                        describe, index_fingerprint, is_manifest, manifest_name, now, parse_manifest,
                                        parse_published)
from mds_core.versions.retention import removable, retained


class ShardSet:
    """The versions under ``root``. Every operation reads the store afresh: there is no cached state."""

    def __init__(self, root: str, *, storage_options: dict[str, Any] | None = None, retry: int = 3) -> None:
        self.store: RemoteStore = open_store(root, retry=retry, timeout=None, storage_options=storage_options)

    def _require_exclusive_create(self) -> None:
        require_exclusive_create(self.store.scheme, self.store.url)

    def __repr__(self) -> str:
        return f"ShardSet({self.store.url!r})"

    # ---------------------------------------------------------------------------------------------
    # reading

    def versions(self) -> list[VersionInfo]:
        """Every committed version, oldest first."""
        names = [n for n in self.store.list(VERSIONS) if is_manifest(n)]
        return sorted((self._manifest(n) for n in names), key=lambda v: v.version)

    def latest(self) -> VersionInfo | None:
        """The newest committed version: one listing and one manifest read, however long the history."""
        return self._latest_in(self.store.list(VERSIONS))

    def _latest_in(self, listing: Iterable[str]) -> VersionInfo | None:
        newest = _newest_number(listing)
        return self._manifest(manifest_name(newest)) if newest is not None else None

    def version(self, number: int) -> VersionInfo:
        """The manifest of version ``number`` (``mds versions show``)."""
        data = self._read_if_present(manifest_name(number))
        if data is None:
            known = [v.version for v in self.versions()]
            raise ConfigurationError(f"{self.store.url}: no version {number}; versions here: {known or 'none'}")
        return parse_manifest(data, self.store.url_of(manifest_name(number)), number)

    def published(self) -> int | None:
        """The version training code resolves by default: the one whose index is the root's ``index.json``.

        ``published.json`` names it with its index's fingerprint. If a publish was interrupted
        between its two writes, the fingerprints disagree and the version is found by fingerprint,
        so this always agrees with what plain MDS readers of the root read.
        """
        root_index = self._read_if_present(INDEX_BASENAME)
        if root_index is None:
            return None
        root_fingerprint = index_fingerprint(root_index)
        published = self._read_if_present(PUBLISHED)
        record = parse_published(published, self.store.url_of(PUBLISHED)) if published is not None else {}
        if record.get("fingerprint") == root_fingerprint:
            return record["version"]
        matching = [v.version for v in self.versions() if v.fingerprint == root_fingerprint]
        return matching[-1] if matching else None

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
        self._require_exclusive_create()  # before anything is written, not at the commit
        return Transaction(self, mode, dict(lineage or {}), publish)

    def commit(self, transaction: str, mode: str, lineage: dict[str, Any] | None = None,
               publish: bool = True, parent: int | None | str = "latest") -> VersionInfo:
        """Commit the MDS dataset written to ``data/<transaction>/`` as the version after ``parent``.

        ``parent`` is the version the writer started from (``"latest"``: whatever is latest now).
        Raises ``VersionConflictError`` if another writer committed after ``parent`` first; the
        written shards are kept, so calling ``commit`` again puts them on top of the winner.

        Retrying is safe: if a process died after committing ``transaction`` (its manifest exists)
        but before returning, calling ``commit`` again returns that version (and publishes it if
        it is still the latest) rather than adding the same shards a second time.
        """
        self._require_exclusive_create()
        listing = set(self.store.list(VERSIONS))  # one listing answers both questions below
        done = _committed_as(transaction, listing)
        if done is not None:
            if publish and _newest_number(listing) == done:  # never roll a newer one back
                self.publish(done)
            return self.version(done)
        folder = f"{DATA}/{transaction}"
        written = parse_index(self.store.read_bytes(f"{folder}/{INDEX_BASENAME}"), self.store.url_of(folder))
        new = [shard.with_prefix(folder) for shard in written]
        base_info = self._latest_in(listing) if parent == "latest" else self.version(int(parent)) if parent else None
        base = self.shards(base_info.version) if base_info is not None and mode == "append" else []
        shards = base + new
        if not shards:
            raise ConfigurationError(f"{self.store.url_of(folder)}: the transaction wrote no shards")
        if base and new:
            check_same_columns([base[0], *new], f"version {base_info.version} and transaction {transaction}",
                               f"Write the same columns, or commit it with ShardSet.commit({transaction!r}, "
                               "'overwrite') to start afresh")
        number = (base_info.version + 1) if base_info is not None else 1
        index_text = dumps_merged_index(shards).encode("utf-8")
        index_name = f"{VERSIONS}/{number:08d}.{transaction}.index.json"
        self.store.write_bytes(index_name, index_text)  # invisible until the manifest exists
        info = describe(number, base_info, mode, transaction, index_name, shards, len(new), index_text, lineage or {})
        if not self.store.write_if_absent(manifest_name(number), json.dumps(info.to_json(), indent=1).encode()):
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
        """Point the root's ``index.json`` (what plain readers and ``version=None`` read) at ``number``.

        The root ``index.json`` is replaced first (one atomic write: the commit point), then
        ``published.json`` records which version that is; ``published()`` stays right even if the
        process dies between the two.
        """
        info = self.version(number)
        self.store.write_bytes(INDEX_BASENAME, self.store.read_bytes(info.index))
        self.store.write_bytes(PUBLISHED, json.dumps({"version": number, "fingerprint": info.fingerprint}).encode())

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
        keep = retained(versions, keep_last, newer_than, self.published())
        needed: set[str] = {INDEX_BASENAME, PUBLISHED}
        for info in versions:
            if info.version in keep:
                needed |= {manifest_name(info.version), info.index}
                needed |= {f.basename for s in self.shards(info.version) for f in (s.raw_data, s.zip_data) if f}
        cutoff = now() - grace
        committed = {v.transaction for v in versions} | {v.index for v in versions}
        doomed = [name for name in self.store.list()
                  if name not in needed and removable(self.store, name, committed, cutoff)]
        # Manifests go first: a version disappears before any of its files do.
        doomed.sort(key=lambda n: (not is_manifest(n), n))
        if not dry_run:
            for name in doomed:
                self.store.delete(name)
        removed = sorted(v.version for v in versions if v.version not in keep)
        return VacuumReport(sorted(keep), removed, doomed)

    def _read_if_present(self, rel: str) -> bytes | None:
        """The file's bytes, or None if it does not exist (one request, not a lookup and a read)."""
        try:
            return self.store.read_bytes(rel)
        except StoreFileNotFoundError:
            return None

    def _manifest(self, name: str) -> VersionInfo:
        number = int(posixpath.basename(name)[:-5])  # is_manifest() checked the name
        return parse_manifest(self.store.read_bytes(name), self.store.url_of(name), number)


class Transaction:
    """A version being written: shards go to ``out``; leaving the ``with`` block commits them."""

    def __init__(self, shard_set: ShardSet, mode: str, lineage: dict[str, Any], publish: bool) -> None:
        self.shard_set, self.mode, self.lineage, self.publish = shard_set, mode, lineage, publish
        stamp = now().strftime("%Y%m%dT%H%M%S")
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


def resolve_version_index(root: str, version: int, storage_options: dict[str, Any] | None = None,
                          retry: int = 3) -> str:
    """The path of version ``version``'s index relative to ``root`` (for ``Stream(version=...)``).

    ``retry``: attempts per read; a stream passes its ``download_retry`` so that resolving the version
    survives what its downloads survive."""
    return ShardSet(root, storage_options=storage_options, retry=retry).version(version).index


# ------------------------------------------------------------------------------------------------


def _newest_number(listing: Iterable[str]) -> int | None:
    """The highest version number whose manifest is in a listing of ``_versions/``."""
    return max((int(posixpath.basename(n)[:-5]) for n in listing if is_manifest(n)), default=None)


def _committed_as(transaction: str, listing: set[str]) -> int | None:
    """The version that committed ``transaction``, if any, from a listing of ``_versions/``.

    A version's index is named after its transaction, and the version exists once its manifest
    does, so the listing answers it without reading a manifest.
    """
    for name in listing:
        number, _, rest = name[len(VERSIONS) + 1:].partition(".")
        if rest == f"{transaction}.index.json" and number.isdecimal() and manifest_name(int(number)) in listing:
            return int(number)
    return None
