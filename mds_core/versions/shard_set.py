"""``ShardSet``: the versions under one root: read them, commit new ones, publish one, vacuum the rest.

A version becomes visible only when its manifest exists (``mds_core.versions.manifest`` describes the
layout). The manifest is created with an exclusive create (a hard link locally, ``If-None-Match: *``
on object stores), so when two writers commit the same version number exactly one wins; the other
gets ``VersionConflictError`` and its shards stay where they are, to be committed again on top of
the winner. Finding the newest version reads a hint and probes past it (``mds_core.versions.head``),
so the daily path costs the same number of requests in the first week and after years.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
from collections.abc import Iterator
from typing import Any

from mds_core.errors import ConfigurationError, NothingToRollBackError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_merged_index, parse_index
from mds_core.storage.exclusive import require_exclusive_create
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.versions.head import manifest_if_present, newest_first, read_head, read_if_present, tip, write_head
from mds_core.versions.manifest import (
    DATA,
    PUBLISHED,
    VERSIONS,
    VacuumReport,
    VersionDiff,
    VersionInfo,
    describe,
    index_fingerprint,
    is_manifest,
    manifest_name,
    now,
    parse_manifest,
    parse_published,
)
from mds_core.versions.numbering import check_mode, conflict_error, follows, seen_floor
from mds_core.versions.partitions import check_combined, combine, read_written
from mds_core.versions.publication import history_before, published_record, pushed, rollback_target
from mds_core.versions.retention import doomed_files, retained
from mds_core.versions.retried import committed_as
from mds_core.versions.transaction import Transaction
from mds_core.versions.verdicts import read_verdict, write_verdict


class ShardSet:
    """The versions under ``root``. Every operation reads the store afresh: there is no cached state.

    Args:
        root: the shard set's folder, local or any URL fsspec opens; or an open ``RemoteStore`` at it, whose client
            is used as it is (a stream's: no second client; ``storage_options`` and ``retry`` are then the store's).
        storage_options: fsspec options for the store (credentials, endpoint); None takes the environment's.
        retry: attempts per read or write of the store (default 3).
    """

    def __init__(
        self, root: str | RemoteStore, *, storage_options: dict[str, Any] | None = None, retry: int = 3
    ) -> None:
        if isinstance(root, RemoteStore):
            self.store: RemoteStore = root
        else:
            self.store = open_store(root, retry=retry, timeout=None, storage_options=storage_options)

    def _require_exclusive_create(self) -> None:
        require_exclusive_create(self.store.scheme, self.store.url)

    def __repr__(self) -> str:
        return f"ShardSet({self.store.url!r})"

    # ---------------------------------------------------------------------------------------------
    # reading

    def versions(self) -> list[VersionInfo]:
        """Every committed version, oldest first (one listing, and every manifest)."""
        names = [n for n in self.store.list(VERSIONS) if is_manifest(n)]
        return sorted((self._manifest(n) for n in names), key=lambda v: v.version)

    def latest(self) -> VersionInfo | None:
        """The newest committed version.

        The hint, its manifest and one probe past it (three reads), however long the history.
        """
        found, _ = tip(self.store)
        return found[-1] if found else None

    def newest_first(self, since: dt.datetime | None = None) -> Iterator[VersionInfo]:
        """The versions from the newest back, one read each, ending at a gap or before one created before ``since``.

        Args:
            since: stop before the first version created before this time (None: go back to the first).
        """
        return newest_first(self.store, since)

    def version(self, number: int) -> VersionInfo:
        """The manifest of version ``number`` (``mds versions show``).

        Args:
            number: the version's number.

        Raises:
            ConfigurationError: no such version; the message lists the versions there are.
        """
        info = manifest_if_present(self.store, number)
        if info is None:
            known = [v.version for v in self.versions()]
            raise ConfigurationError(f"{self.store.url}: no version {number}; versions here: {known or 'none'}")
        return info

    def published(self) -> int | None:
        """The version training code resolves by default: the one whose index is the root's ``index.json``.

        ``published.json`` names it with its index's fingerprint. If a publish was interrupted
        between its two writes, the fingerprints disagree and the version is found by fingerprint,
        so this always agrees with what plain MDS readers of the root read.
        """
        root_index = read_if_present(self.store, INDEX_BASENAME)
        if root_index is None:
            return None
        root_fingerprint = index_fingerprint(root_index)
        published = read_if_present(self.store, PUBLISHED)
        record = parse_published(published, self.store.url_of(PUBLISHED)) if published is not None else None
        if record is not None and record["fingerprint"] == root_fingerprint:
            return record["version"]
        matching = [v.version for v in self.versions() if v.fingerprint == root_fingerprint]
        return matching[-1] if matching else None

    def index_bytes(self, number: int) -> bytes:
        """Version ``number``'s ``index.json`` text; its basenames are relative to the root.

        Args:
            number: the version's number.
        """
        return self.store.read_bytes(self.version(number).index)

    def shards(self, number: int) -> list[ShardInfo]:
        """The shards of version ``number``.

        Args:
            number: the version's number.
        """
        return parse_index(self.index_bytes(number), f"{self.store.url} version {number}")

    def diff(self, old: int, new: int) -> VersionDiff:
        """Shards and rows added and removed between two versions.

        Args:
            old: the version compared from.
            new: the version compared to.
        """
        before = {s.raw_data.basename: s.samples for s in self.shards(old)}
        after = {s.raw_data.basename: s.samples for s in self.shards(new)}
        added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
        return VersionDiff(old, new, added, removed, sum(after[b] for b in added), sum(before[b] for b in removed))

    # ---------------------------------------------------------------------------------------------
    # writing

    def transaction(
        self,
        mode: str = "append",
        lineage: dict[str, Any] | None = None,
        publish: bool = True,
        base: int | str | None = "latest",
    ) -> Transaction:
        """Start a new version: write it inside ``with shard_set.transaction(mode) as tx:``, commit on exit.

        Write an MDS dataset to ``tx.out`` (or partitions to ``tx.partition_out(key)``).

        Args:
            mode: ``append`` (the base's shards and the new), ``overwrite`` (the new alone) or
                ``replace`` (the base's, with the partitions written here replaced whole).
            lineage: JSON-able facts kept in the manifest (source table, run id, ...).
            publish: point the root's ``index.json`` at the new version when it commits.
            base: the version built on: ``"latest"``, ``"published"``, a number, or None (start
                empty). Whatever the base, the new version's number is the newest's plus one.
        """
        check_mode(mode)
        self._require_exclusive_create()  # before anything is written, not at the commit
        found, _ = tip(self.store)
        parent = self._resolve(base, found)
        return Transaction(
            self.store,
            self.commit,
            mode,
            dict(lineage or {}),
            publish,
            parent=parent.version if parent is not None else None,  # what this writer builds on
            seen=found[-1].version if found else None,  # the newest now: this commits as seen + 1
        )

    def commit(
        self,
        transaction: str,
        mode: str,
        lineage: dict[str, Any] | None = None,
        publish: bool = True,
        parent: int | str | None = "latest",
        *,
        seen: int | str | None = "parent",
        partitions: list[str] | None = None,
    ) -> VersionInfo:
        """Commit what was written to ``data/<transaction>/`` as a new version built on ``parent``.

        Retrying is safe: if a process died after committing ``transaction`` (its manifest exists)
        but before returning, calling ``commit`` again returns that version (and publishes it if
        it is still the latest) rather than adding the same shards a second time.

        Args:
            transaction: the name of the folder under ``data/`` that holds the written shards.
            mode: ``append``, ``overwrite`` or ``replace``, as ``transaction()`` takes it.
            lineage: JSON-able facts kept in the manifest.
            publish: point the root's ``index.json`` at the new version.
            parent: the base version, as ``transaction(base=...)`` takes it.
            seen: the newest version when the writer started; the new version is ``seen + 1``. By
                default that is ``parent`` when it is a number (or None), and the newest version now
                otherwise.
            partitions: the keys written with ``partition_out`` (None: whatever
                ``data/<transaction>/`` holds).

        Returns:
            The new version's manifest.

        Raises:
            VersionConflictError: another writer committed that number first. The written shards are
                kept, so calling ``commit`` again puts them on top of the winner.
        """
        check_mode(mode)
        self._require_exclusive_create()
        found, fresh = tip(self.store)
        newest = found[-1].version if found else None
        done = committed_as(self.store, transaction, found, seen_floor(parent, seen), self.version)
        if done is not None:
            return self._finish_retry(done, newest, fresh, publish)
        base = self._resolve(parent, found)
        number = follows(parent, seen, base, newest) + 1
        written = read_written(self.store, transaction, partitions)
        base_shards = self._index_of(base) if base is not None and mode != "overwrite" else []
        shards, parts = combine(mode, base, base_shards, written, self.store.url)
        check_combined(self.store.url_of(f"{DATA}/{transaction}"), shards, written, base, transaction)
        index_text = dumps_merged_index(shards).encode("utf-8")
        index_name = f"{VERSIONS}/{number:08d}.{transaction}.index.json"
        self.store.write_bytes(index_name, index_text)  # invisible until the manifest exists
        info = describe(
            number, base, mode, transaction, index_name, shards, len(written.shards), index_text, lineage or {}, parts
        )
        if not self.store.write_if_absent(manifest_name(number), json.dumps(info.to_json(), indent=1).encode()):
            self.store.delete(index_name)
            raise conflict_error(
                self.store.url, self.store.url_of(f"{DATA}/{transaction}"), number, transaction, mode, base
            )
        write_head(self.store, number)
        if publish:
            self._publish(info, pushed(published_record(self.store), number), index_text)
        return info

    def publish(self, number: int) -> None:
        """Point the root's ``index.json`` (what plain readers and ``version=None`` read) at ``number``.

        The root ``index.json`` is replaced first (one atomic write: the commit point), then
        ``published.json`` records which version that is, and the ones published before it;
        ``published()`` stays right even if the process dies between the two.

        Args:
            number: the version to publish.
        """
        info = self.version(number)
        self._publish(info, pushed(published_record(self.store), number))

    def rollback(self) -> int:
        """Publish again the version published before the current one (skipping vacuumed ones); return it."""
        current = self.published()
        history = history_before(published_record(self.store), current)
        found = rollback_target(history, current, lambda n: manifest_if_present(self.store, n))
        if found is None:
            raise NothingToRollBackError(
                f"{self.store.url}: nothing to roll back to: version {current} is published "
                f"and no earlier publication is recorded that still exists (recorded: "
                f"{history or 'none'}); publish a version by number instead"
            )
        info, rest = found
        self._publish(info, rest)
        return info.version

    def record_verdict(self, number: int, check: str, verdict: dict[str, Any]) -> None:
        """Keep what ``check`` found about version ``number`` with the version (``mds_core.versions.verdicts``).

        Args:
            number: the version judged.
            check: the check's name (for example ``loader_smoke_test``).
            verdict: JSON-able findings, read back by ``verdict()``.
        """
        self.version(number)  # a verdict about a version that does not exist would mislead its readers
        write_verdict(self.store, number, check, verdict)

    def verdict(self, number: int, check: str) -> dict[str, Any] | None:
        """What ``check`` last recorded about version ``number``, or None.

        Args:
            number: the version judged.
            check: the check's name, as given to ``record_verdict``.
        """
        return read_verdict(self.store, number, check)

    # ---------------------------------------------------------------------------------------------
    # retention

    def vacuum(
        self,
        keep_last: int | None = None,
        newer_than: dt.datetime | None = None,
        grace: dt.timedelta = dt.timedelta(hours=1),
        dry_run: bool = False,
        force: bool = False,
    ) -> VacuumReport:
        """Delete versions outside the retention and every file of the set's own folders no kept version needs.

        The newest and the published versions are always kept. Only ``data/`` and ``_versions/`` are
        looked at, and in the root only the temporary copies of its ``index.json`` a killed writer
        left: whatever else is under the root is not the set's.

        Args:
            keep_last: keep the last this many versions (with neither limit, every version is kept
                and only debris goes).
            newer_than: keep the versions created after this time.
            grace: files of unfinished transactions (no manifest) are debris once older than this,
                so a commit in progress is never removed from under its writer.
            dry_run: report what would go, delete nothing.
            force: clean a root with no manifest, which is refused otherwise: it is not a shard set
                (a typo, a parent folder, a bucket's root).
        """
        versions = self.versions()
        if not versions and not force:
            raise ConfigurationError(
                f"{self.store.url}: not a shard set (no version manifest in {VERSIONS}/), so vacuum deletes nothing "
                f"here; check the path (a shard set's root, not the folder above it), or pass force=True (--force) "
                f"to remove an unfinished first commit's files from {DATA}/ and {VERSIONS}/"
            )
        keep = retained(versions, keep_last, newer_than, self.published())
        doomed = doomed_files(self.store, versions, keep, self._index_of, now() - grace)
        if not dry_run:
            if versions and read_head(self.store) != versions[-1].version:
                # Before any manifest goes: probing from a stale hint must not stop at a gap made here.
                write_head(self.store, versions[-1].version)
            for name in doomed:
                self.store.delete(name)
        removed = sorted(v.version for v in versions if v.version not in keep)
        return VacuumReport(sorted(keep), removed, doomed)

    # ---------------------------------------------------------------------------------------------
    # helpers

    def _manifest(self, name: str) -> VersionInfo:
        number = int(posixpath.basename(name)[:-5])  # is_manifest() checked the name
        return parse_manifest(self.store.read_bytes(name), self.store.url_of(name), number)

    def _index_of(self, info: VersionInfo) -> list[ShardInfo]:
        return parse_index(self.store.read_bytes(info.index), f"{self.store.url} version {info.version}")

    def _resolve(self, base: Any, found: list[VersionInfo]) -> VersionInfo | None:
        """The version ``base`` names ("latest", "published", a number, None), from ``found`` if it is there."""
        if base == "published":
            base = self.published()
        elif base == "latest":
            return found[-1] if found else None
        if base is None:
            return None
        if not isinstance(base, int) or isinstance(base, bool) or base < 1:
            raise ConfigurationError(
                f"{self.store.url}: a base version is 'latest', 'published', a version number or None, got {base!r}"
            )
        return next((v for v in found if v.version == base), None) or self.version(base)

    def _finish_retry(self, done: VersionInfo, newest: int | None, fresh: bool, publish: bool) -> VersionInfo:
        if not fresh and newest is not None:  # the earlier attempt may have died before rewriting the hint
            write_head(self.store, newest)
        if publish and newest == done.version:  # never roll a newer one back
            self.publish(done.version)
        return done

    def _publish(self, info: VersionInfo, history: list[int], index_text: bytes | None = None) -> None:
        text = index_text if index_text is not None else self.store.read_bytes(info.index)
        self.store.write_bytes(INDEX_BASENAME, text)
        record = {"version": info.version, "fingerprint": info.fingerprint, "history": history}
        self.store.write_bytes(PUBLISHED, json.dumps(record).encode())


def resolve_version(
    root: str, version: int, storage_options: dict[str, Any] | None = None, retry: int = 3
) -> VersionInfo:
    """The manifest of version ``version`` of the shard set at ``root`` (for ``Stream(version=...)``).

    Its index's path relative to ``root``, and the fingerprint that index must have.

    ``retry``: attempts per read; a stream passes its ``download_retry`` so that resolving the version
    survives what its downloads survive.
    """
    return ShardSet(root, storage_options=storage_options, retry=retry).version(version)
