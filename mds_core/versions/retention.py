"""Retention: which versions ``vacuum`` keeps, and which files it may delete."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from mds_core.errors import ConfigurationError
from mds_core.format.index import INDEX_BASENAME, ShardInfo
from mds_core.storage.files import is_temporary_of
from mds_core.storage.remote import RemoteStore
from mds_core.versions.manifest import DATA, HEAD, PUBLISHED, VERSIONS, VersionInfo, is_manifest, manifest_name
from mds_core.versions.verdicts import verdict_of_kept


def root_temporaries(store: RemoteStore) -> list[str]:
    """The published ``index.json``'s temporary copies that killed writers left in the root.

    Only these are taken from the root, which may hold files that are not the set's; a local store
    publishes through such a copy (object stores write in place), so a crash can leave one behind.
    """
    return [name for name in store.list(maxdepth=1) if is_temporary_of(name, INDEX_BASENAME)]


def removable(store: RemoteStore, name: str, committed: set[str], cutoff: dt.datetime) -> bool:
    """Unneeded files of committed versions go at once.

    Anything else (an unfinished commit's files) only once older than the grace period, so a commit in progress is never
    removed from its writer.
    """
    parts = name.split("/")
    if is_manifest(name) or name in committed or (parts[0] == DATA and len(parts) > 2 and parts[1] in committed):
        return True
    return _modified(store, name) < cutoff


def _modified(store: RemoteStore, name: str) -> dt.datetime:
    info = store.fs.info(f"{store.path.rstrip('/')}/{name}")
    stamp = info.get("LastModified") or info.get("mtime") or info.get("created")
    if isinstance(stamp, dt.datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(float(stamp or 0), dt.UTC)


def retained(
    versions: list[VersionInfo], keep_last: int | None, newer_than: dt.datetime | None, published: int | None
) -> set[int]:
    """The version numbers a vacuum keeps: the newest ``keep_last``, those newer than ``newer_than``, the published one."""
    if keep_last is None and newer_than is None:
        return {v.version for v in versions}
    if keep_last is not None and keep_last < 1:
        raise ConfigurationError(f"keep_last must be >= 1, got {keep_last}")
    keep = {v.version for v in versions[-keep_last:]} if keep_last else set()
    if newer_than is not None:
        keep |= {v.version for v in versions if dt.datetime.fromisoformat(v.created) > newer_than}
    if published is not None:
        keep.add(published)
    if versions:  # numbers only grow: the next commit follows the newest, so its manifest must stay
        keep.add(versions[-1].version)
    return keep


def doomed_files(
    store: RemoteStore,
    versions: list[VersionInfo],
    keep: set[int],
    index_of: Callable[[VersionInfo], list[ShardInfo]],
    cutoff: dt.datetime,
) -> list[str]:
    """The files of the set's own folders that no kept version needs, manifests first.

    Manifests go first so that a version disappears before any of its files do.
    """
    needed: set[str] = {INDEX_BASENAME, PUBLISHED, HEAD}
    for info in versions:
        if info.version in keep:
            needed |= {manifest_name(info.version), info.index}
            needed |= {f.basename for s in index_of(info) for f in (s.raw_data, s.zip_data) if f}
    committed = {v.transaction for v in versions} | {v.index for v in versions}
    doomed = [
        name
        for name in store.list(DATA) + store.list(VERSIONS) + root_temporaries(store)
        if name not in needed and not verdict_of_kept(name, keep) and removable(store, name, committed, cutoff)
    ]
    return sorted(doomed, key=lambda n: (not is_manifest(n), n))
