"""``Stream``: one MDS dataset inside a ``StreamingDataset``, with its weight in the mix."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import TYPE_CHECKING, Any

from mds_core.errors import ConfigurationError, InvalidIndexError
from mds_core.format.index import INDEX_BASENAME, MAX_INDEX_BYTES
from mds_core.order.mixing import StreamWeights
from mds_core.storage.files import atomic_write
from mds_core.storage.folders import inside, owned_folder, private_folder
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.shard_cache import CACHE_DIR, ShardCache
from mds_core.storage.urls import local_path
from mds_core.streaming.jobdir import user_dir
from mds_core.streaming.local import LocalDataset

if TYPE_CHECKING:
    from mds_core.versions import ShardSet

# Settings a Stream inherits from its StreamingDataset when left as None.
INHERITED = ("download_retry", "download_timeout", "validate_hash", "keep_zip")
VERSION_RECORD = "version-index.json"  # in CACHE_DIR: which pinned version the cached index.json is


class Stream:
    """A dataset directory (``local``, optionally copied from ``remote``) and how much of it an epoch takes.

    Arguments and checks follow ``streaming.Stream``; at most one of ``proportion``, ``repeat`` or
    ``choose`` may be given. The download settings left None take the dataset's.

    Args:
        remote: the dataset's URL (any URL ``open_store`` accepts) or a versioned shard set's root.
        local: the dataset's folder, or the cache of ``remote`` (yours alone); with None the cache is
            ``<temp>/mds-<user>/cache/<hash of remote and split>``.
        split: the subfolder of ``remote`` and ``local`` to read.
        proportion: the stream's share of the epoch, relative to the other streams' proportions.
        repeat: how many times over the stream each epoch takes (absolute; may be fractional).
        choose: how many of the stream's samples each epoch takes (absolute).
        download_retry: attempts per download after the first; None takes the dataset's.
        download_timeout: seconds each download may take; None takes the dataset's.
        validate_hash: a hash algorithm to check downloads with; None takes the dataset's.
        keep_zip: keep compressed shards in the cache too; None takes the dataset's.
        version: read exactly this version of the [versioned shard set](versions.md) at ``remote`` (ours).
        name: what a mixing ``Schedule`` calls the stream; default ``remote``, else ``local`` (ours).
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | None = None,
        keep_zip: bool | None = None,
        version: int | None = None,
        name: str | None = None,
    ) -> None:
        self.weights = StreamWeights(proportion=proportion, repeat=repeat, choose=choose)
        self.proportion, self.repeat, self.choose = proportion, repeat, choose
        if download_retry is not None and (not isinstance(download_retry, int) or download_retry < 0):
            raise ConfigurationError(f"download_retry must be an int >= 0, got {download_retry!r}")
        if download_timeout is not None and not download_timeout > 0:
            raise ConfigurationError(f"download_timeout must be > 0 seconds, got {download_timeout!r}")
        if local is None and remote is None:
            raise ConfigurationError("a Stream needs local= (a dataset directory) or remote=")
        if remote is not None and local is not None and os.fspath(remote) == os.fspath(local):
            remote = None  # the dataset is already here, as in the reference
        self.remote = os.fspath(remote) if remote is not None else None
        self.split = split
        self.download_retry, self.download_timeout = download_retry, download_timeout
        self.validate_hash, self.keep_zip = validate_hash, keep_zip
        self.version = _check_version(version, self.remote, split)
        if local is not None:
            self.local = local_path(local)
            if self.remote is not None:  # a cache: what is found there is read as the remote's data
                owned_folder(self.local, "pass another local=")
        else:
            pinned = f"{self.remote}@{version}" if version is not None else self.remote or ""
            self.local = default_cache_dir(pinned, split)
        # What a mixing schedule calls the stream: given, or where its data comes from.
        self.name = name if name is not None else self.remote or self.local

    @property
    def root(self) -> str:
        """The local directory that holds this stream's ``index.json``."""
        return os.path.join(self.local, self.split or "")

    def index_source(self) -> str:
        """This stream's ``index.json`` as messages name it: the remote file (the one to repair), else the local one."""
        if self.remote is None:
            return os.path.join(self.root, INDEX_BASENAME)
        if self.version is not None:  # its index is a file under _versions/ that the version's manifest names
            return f"the index of version {self.version} of {self.store().url_of('')}"
        return self.store().url_of(INDEX_BASENAME)

    def store(self) -> RemoteStore:
        """The remote directory of this stream's split (only for streams with a remote).

        One ``RemoteStore``, so one client, serves the index and every shard (building an S3 client
        takes 0.2-0.4 s); it is made again only if the retry or timeout settings changed since.
        """
        if self.remote is None:
            raise ConfigurationError(f"stream {self.local!r} has no remote")
        url = self.remote if not self.split else f"{self.remote.rstrip('/')}/{self.split}"
        key = (url, max(1, self.download_retry or 1), self.download_timeout)
        made: tuple[tuple[Any, ...], RemoteStore] | None = self.__dict__.get("_store")
        if made is None or made[0] != key:
            made = self._store = (key, open_store(url, retry=key[1], timeout=key[2]))
        return made[1]

    def shard_set(self) -> ShardSet:
        """The shard set at ``remote``, read through this stream's own store and client (for a pinned version).

        With the stream's retry budget, never fewer than ``ShardSet``'s own 3 attempts.
        """
        from mds_core.versions import ShardSet  # on first use: a stream of no version never needs it (10 ms to import)

        return ShardSet(self.store().with_retry(max(3, self.download_retry or 1)))

    def fetch_index(self) -> None:
        """Download ``index.json`` from the remote (once per node: the node's first rank calls this).

        A pinned version's index must have the fingerprint its manifest records, or it is refused;
        once cached and checked, it is not fetched again: a committed version never changes.
        """
        if self.remote is None:
            return
        dest = os.path.join(self.root, INDEX_BASENAME)
        if self.version is None:
            self.store().download(INDEX_BASENAME, dest, max_bytes=MAX_INDEX_BYTES)
            return
        if self._has_version_index(dest):
            return  # a committed version never changes: its cached index is still its index
        version = self.shard_set().version(self.version)
        self.store().download(version.index, dest, max_bytes=MAX_INDEX_BYTES)
        with open(dest, "rb") as file:
            text = file.read()
        found = _fingerprint(text)
        if found != version.fingerprint:
            os.unlink(dest)
            raise InvalidIndexError(
                f"{self.store().url_of(version.index)}: its fingerprint is {found}, but version {self.version}'s "
                f"manifest records {version.fingerprint}: the index was replaced or damaged on the store"
            )
        self._record_version_index(text)

    def _version_record(self, index_text: bytes) -> bytes:
        """What ties a cached index to this remote and version.

        Both, the index's own hash, and the fingerprint it had when it was fetched and checked against the version's
        manifest.
        """
        digest, fingerprint = hashlib.sha256(index_text).hexdigest(), _fingerprint(index_text)
        record = {"remote": self.remote, "version": self.version, "index_sha256": digest, "fingerprint": fingerprint}
        return json.dumps(record).encode()

    def _has_version_index(self, index_path: str) -> bool:
        """Whether ``index_path`` is the index this stream's pinned version was fetched and checked with.

        The record lives beside the shard cache, in a folder only this user can write, and is written
        only after the index matched its manifest's fingerprint. It names the remote, the version and
        the index's hash, so an index another version, remote or an unpinned read left in the same
        ``local`` (or a copy cut short by a crash) is fetched and checked again.
        """
        try:
            with (
                open(os.path.join(self.root, CACHE_DIR, VERSION_RECORD), "rb") as file,
                open(index_path, "rb") as index,
            ):
                return file.read() == self._version_record(index.read())
        except FileNotFoundError:
            return False

    def _record_version_index(self, index_text: bytes) -> None:
        record = inside(self.root, f"{CACHE_DIR}/{VERSION_RECORD}")  # never through a link out of the cache
        os.makedirs(os.path.dirname(record), exist_ok=True)
        atomic_write(record, [self._version_record(index_text)], False)

    def apply_default(self, defaults: dict[str, Any]) -> None:
        """Take the dataset's value for every setting this stream left as None.

        Args:
            defaults: the dataset's values, by setting name.
        """
        for name in INHERITED:
            if getattr(self, name) is None:
                setattr(self, name, defaults[name])

    def open(self, allow_unsafe_types: bool) -> LocalDataset:
        """The stream's samples, memory-mapped shard by shard; remote shards download on first use.

        A remote stream's index is a copy in the cache: an error in it names the remote file, which is
        the one to repair (the copy is fetched again at the next start), and never the copy.

        Args:
            allow_unsafe_types: open shards with pickle columns.
        """
        if self.remote is None:
            return LocalDataset(self.local, self.split, allow_unsafe_types=allow_unsafe_types)
        store = self.store()
        dataset = LocalDataset(
            self.local,
            self.split,
            allow_unsafe_types=allow_unsafe_types,
            source=store.url_of(""),
            index_source=self.index_source(),
        )
        dataset.shard_cache = ShardCache(
            store, dataset.root, dataset.shards, validate_hash=self.validate_hash, keep_zip=bool(self.keep_zip)
        )
        return dataset

    def __repr__(self) -> str:
        version = f", version={self.version}" if self.version is not None else ""
        return f"Stream(remote={self.remote!r}, local={self.local!r}, split={self.split!r}{version}, weights={self.weights})"


def _fingerprint(index_text: bytes) -> str:
    """``manifest.index_fingerprint``, imported on first use (as ``ShardSet``)."""
    from mds_core.versions.manifest import index_fingerprint

    return index_fingerprint(index_text)


def default_cache_dir(remote: str, split: str | None) -> str:
    """A cache directory of its own for each remote, split and user: ``<temp>/mds-<user>/cache/<hash>``.

    Created here, inside the user's private folder (0700, owner checked) wherever the job root is:
    anyone could create a folder of that predictable name first in a shared temp folder.
    """
    key = hashlib.sha256(f"{remote}\0{split or ''}".encode()).hexdigest()[:16]
    user = private_folder(user_dir(tempfile.gettempdir()), DEFAULT_CACHE_FIX)
    path = os.path.join(user, "cache", key)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


DEFAULT_CACHE_FIX = "pass local= (a cache folder of your own), or set TMPDIR to a folder of your own"


def _check_version(version: int | None, remote: str | None, split: str | None) -> int | None:
    """``version=N`` reads version N of the versioned shard set at ``remote`` (see ``mds_core.versions``)."""
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigurationError(f"version must be a version number >= 1, got {version!r}")
    if remote is None:
        raise ConfigurationError(f"version={version} needs remote= (the shard set's root), with local= as the cache")
    if split is not None:
        raise ConfigurationError("version= and split= cannot be combined: a shard set's versions have no splits")
    return version
