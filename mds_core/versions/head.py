"""Finding the newest version in a constant number of requests, however long the history.

``_versions/`` grows by two files a day; listing it costs a request per 1000 keys on S3. Instead
``_versions/head.json`` (``{"version": N}``) is rewritten after each commit, as a *hint*: it may be
stale (a writer died between its manifest and the hint, or two writers' hints crossed) or missing
(a set committed by an older release). The manifests stay the only truth: from the hint, each next
manifest is probed with one read until one is absent. A missing or damaged hint, or one so stale
that probing would cost more than listing, falls back to one listing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
from collections.abc import Iterable, Iterator

from mds_core.errors import StorageError, StoreFileNotFoundError
from mds_core.storage.remote import RemoteStore
from mds_core.versions.manifest import (
    HEAD,
    VERSIONS,
    VersionInfo,
    created_before,
    is_manifest,
    manifest_name,
    parse_manifest,
)

log = logging.getLogger(__name__)

MAX_PROBES = 32  # past this many versions beyond the hint, one listing is cheaper than more probes


def read_if_present(store: RemoteStore, rel: str) -> bytes | None:
    """The file's bytes, or None if it does not exist (one request, not a lookup and a read)."""
    try:
        return store.read_bytes(rel)
    except StoreFileNotFoundError:
        return None


def manifest_if_present(store: RemoteStore, number: int) -> VersionInfo | None:
    """The manifest of version ``number``, or None when it is missing."""
    data = read_if_present(store, manifest_name(number))
    return None if data is None else parse_manifest(data, store.url_of(manifest_name(number)), number)


def read_head(store: RemoteStore) -> int | None:
    """The hinted newest version, or None when there is no usable hint (it is never trusted further)."""
    data = read_if_present(store, HEAD)
    try:
        number = json.loads(data)["version"] if data is not None else None
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    return number if isinstance(number, int) and not isinstance(number, bool) and number >= 1 else None


def write_head(store: RemoteStore, number: int) -> None:
    """Point the hint at ``number``.

    Best effort: the version is committed already, and a stale or missing hint only costs later readers a probe or a
    listing, so a failure here is not the commit's.
    """
    try:
        store.write_bytes(HEAD, json.dumps({"version": number}).encode())
    except StorageError as err:
        log.warning("%s: could not update the hint %s (%s); readers will probe past it", store.url, HEAD, err)


def tip(store: RemoteStore) -> tuple[list[VersionInfo], bool]:
    """The manifests from the hinted version to the newest, oldest first, and whether the hint named the newest.

    The list is empty when there is no version; False says a commit should rewrite the hint.
    """
    hint = read_head(store)
    if hint is not None:
        found: list[VersionInfo] = []
        number = hint
        while len(found) <= MAX_PROBES:
            info = manifest_if_present(store, number)
            if info is None and found:  # the first absent one after the hint: the newest is the one before
                return found, number == hint + 1
            if info is None and number > hint:  # neither the hinted version nor the next exists
                break
            if info is not None:
                found.append(info)
            number += 1
    # No hint, a damaged one, one that names nothing, or one far behind: the listing decides.
    newest = newest_listed(store.list(VERSIONS))
    return ([] if newest is None else [_manifest(store, newest)]), False


def _manifest(store: RemoteStore, number: int) -> VersionInfo:
    return parse_manifest(store.read_bytes(manifest_name(number)), store.url_of(manifest_name(number)), number)


def newest_listed(listing: Iterable[str]) -> int | None:
    """The highest version number whose manifest is in a listing of ``_versions/``."""
    return max((int(posixpath.basename(n)[:-5]) for n in listing if is_manifest(n)), default=None)


def newest_first(store: RemoteStore, since: dt.datetime | None = None) -> Iterator[VersionInfo]:
    """The versions from the newest back, one manifest read each, without listing ``_versions/``.

    The walk ends at a missing number (a vacuumed version) or before the first version created before
    ``since``, so a caller looking for a recent version reads a few manifests, not the history.
    """
    found, _ = tip(store)
    info = found[-1] if found else None
    while info is not None and not (since is not None and created_before(info, since)):
        yield info
        info = manifest_if_present(store, info.version - 1) if info.version > 0 else None
