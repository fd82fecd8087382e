"""One client for every remote store, over fsspec (S3 reads: botocore alone): retries, backoff, per-file deadlines.

``open_store(url)`` gives a ``RemoteStore`` rooted at ``url``: a local path, ``file://`` or a URL of any store in
the registry (``mds_core.storage.stores``: S3, GCS, Azure, Hugging Face, Unity Catalog volumes), set up as its entry
says. With ``any_fsspec=True`` a scheme the registry does not know goes to fsspec's own filesystem instead of being
refused. Every failure that survives the retries is a ``StorageError`` naming the URL (missing credentials, at once:
a ``ConfigurationError``); downloads land under a unique temporary name and are renamed into place, so a failed one
never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

from mds_core.errors import ConfigurationError, MDSError, StorageError
from mds_core.storage import clients
from mds_core.storage.byte_ranges import RangeReads
from mds_core.storage.exclusive import create_if_absent
from mds_core.storage.files import atomic_write, staged_path
from mds_core.storage.first_byte import FirstByteTimes, FirstByteWatch
from mds_core.storage.folders import beneath
from mds_core.storage.kill_points import kill_point
from mds_core.storage.retrying import describe, retrying
from mds_core.storage.stores import FSSPEC_FALLBACK, store_kind
from mds_core.storage.transfer_limits import Bound, Truncated, bound, download_blocking, run_bounded, with_deadline
from mds_core.storage.urls import is_remote, local_path, redact

T = TypeVar("T")


class RemoteStore:
    """Files under one root URL. ``retry`` is the total number of attempts per file, as in the reference.

    ``timeout`` is a deadline in seconds for each whole file transfer (not per socket read), or None.
    A store that throttles (429, S3's ``SlowDown``, a 503 with ``Retry-After``) is waited for as it asks, else
    after a jittered backoff, within that deadline and ``MAX_THROTTLED`` times per file; the wait is not counted
    as an attempt (``mds_core.storage.throttle``). ``kind`` is the store's entry in
    the registry (``mds_core.storage.stores``); ``any_fsspec`` lets a scheme the registry does not
    know through to fsspec's own filesystem.
    """

    def __init__(
        self,
        url: str,
        *,
        retry: int = 2,
        timeout: float | None = 60.0,
        storage_options: dict[str, Any] | None = None,
        any_fsspec: bool = False,
    ) -> None:
        if not isinstance(retry, int) or retry < 1:
            raise ConfigurationError(f"retry must be an int >= 1 (total attempts per file), got {retry!r}")
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {timeout!r}")
        self.url = url.rstrip("/") if is_remote(url) else os.path.abspath(local_path(url))
        self.retry, self.timeout, self.storage_options = retry, timeout, dict(storage_options or {})
        self.kind = store_kind(self.url, any_fsspec=any_fsspec)
        self._fs: Any = None
        self._pid = os.getpid()
        self._reader: Any = None  # the kind's own reader (``StoreKind.reader``), opened by ``_open_reader``
        self._reader_pid: int | None = None
        self._first_bytes = FirstByteTimes()  # shared by every thread of this process, and its forked children
        try:  # a kind that knows its path (``StoreKind.path``) builds its client on first use
            self.path = self.kind.unopened_path(self.url) or self._open()[1]
        except MDSError:
            raise
        except Exception as err:  # a client that connects when made (ftp, sftp): its network error, with the URL
            raise StorageError(f"cannot open {redact(self.url)}: {describe(err)}") from err

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, one per process: a forked child opens its own (``mds_core.storage.clients``)."""
        fs = self._fs
        if fs is None or self._pid != os.getpid():
            fs = self._open()[0]
        return fs

    def _open(self) -> tuple[Any, str]:
        """Open this process's filesystem (once, whichever thread asks first)."""
        with clients.opening():
            if self._fs is None or self._pid != os.getpid():
                options = self.storage_options
                if self._fs is not None and self.kind.reopen_options is not None:  # in a forked child
                    options = {**self.kind.reopen_options(self._fs), **options}
                fs, self.path = self.kind.open(self.url, self.timeout, options)
                clients.register(fs)
                self._fs, self._pid = fs, os.getpid()
        return self._fs, self.path

    @property
    def reader(self) -> Any:
        """This process's reader of whole files and byte ranges where the kind has its own (S3), else None."""
        if self._reader_pid != os.getpid():
            self._open_reader()
        return self._reader

    def _open_reader(self) -> None:
        with clients.opening():
            if self._reader_pid != os.getpid() and self.kind.reader is not None:
                self.kind.require_installed(self.url, imported=False)
                self._reader = self.kind.reader(self.timeout, self.storage_options, self._reader)
                if self._reader is not None:  # None: the options ask for the filesystem's reads
                    clients.register(self._reader)
            self._reader_pid = os.getpid()

    def connect(self) -> None:
        """Open the client that downloads use now: in a process about to fork workers that take it over."""
        if self.reader is None and callable(connect := getattr(self.fs, "connect", None)):
            connect()  # else s3fs, for one, makes its session at the first call

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fs": None, "_reader": None, "_reader_pid": None}

    def __repr__(self) -> str:
        return f"RemoteStore({redact(self.url)!r})"

    def url_of(self, rel: str) -> str:
        """``rel``'s URL as messages show it: without a password the root URL may carry (``redact``)."""
        return redact(self.address_of(rel))

    def address_of(self, rel: str) -> str:
        """``rel``'s full URL, credentials included: to hand to another store or writer, never to print."""
        return f"{self.url}/{rel}" if rel else self.url

    def _path_of(self, rel: str) -> str:
        return f"{self.path.rstrip('/')}/{rel}" if rel else self.path

    # ---------------------------------------------------------------------------------------------
    # transfers

    def download(
        self,
        rel: str,
        dest: str,
        *,
        expected_bytes: int | None = None,
        max_bytes: int | None = None,
        check: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """Copy ``rel`` to the local file ``dest`` atomically.

        ``expected_bytes`` catches truncated and oversized bodies: the transfer stops as soon as the
        body passes it, so neither a store nor a forged index can make a download write more than
        that. ``max_bytes`` bounds a file whose size nothing declares (an index) the same way.
        ``check(tmp_path)`` may raise to reject the bytes (a hash mismatch). All count as failed
        attempts and are retried. A request whose first byte is late is sent again (``first_byte``).
        ``sleep(seconds)`` waits between tries (default ``time.sleep``). Downloads are local copies
        (caches), not synced to disk: after a crash, file systems that record a file's size only as its
        data is written (ext4, xfs, btrfs) leave an unsynced copy short, and the cache's size check
        fetches it again.
        """
        limit = bound(expected_bytes, max_bytes)
        watch = self._first_bytes.watch() if self._watches_first_bytes else None

        def attempt() -> None:
            with staged_path(dest, durable=False) as tmp:
                self._download_to(self._path_of(rel), tmp, limit, watch)
                size = os.path.getsize(tmp)
                if expected_bytes is not None and size != expected_bytes:
                    raise Truncated(f"got {size} bytes, expected {expected_bytes}")
                if check is not None:
                    check(tmp)

        self._retrying(f"download of {self.url_of(rel)}", attempt, sleep)

    def upload(self, src: str, rel: str) -> None:
        """Copy the local file ``src`` to ``rel`` (object stores replace the object in one step)."""
        path = self._written(rel)
        self._retrying(f"upload to {self.url_of(rel)}", lambda: self._transfer(self._put_file, src, path))
        kill_point(f"uploaded {rel}")

    def read_bytes(self, rel: str) -> bytes:
        """The whole file ``rel``, retried on transient errors."""
        # fsspec ships no types: its filesystems are Any to mypy (cat_file returns bytes, exists a bool).
        data: bytes = self._retrying(f"read of {self.url_of(rel)}", lambda: self._cat(self._path_of(rel)))
        return data

    def _cat(self, path: str) -> bytes:
        """The whole file at ``path``, in one request."""
        reader = self.reader
        data: bytes = reader.cat_file(path) if reader is not None else self.fs.cat_file(path, **self.kind.whole_read)
        return data

    @property
    def reads_ranges(self) -> bool:
        """Whether ``read_ranges`` works here: the store reads part of a file in one request (``StoreKind.read_range``)."""
        return self.kind.read_range is not None

    def read_ranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[bytes]:
        """The bytes ``[begin, end)`` of each ``(rel, begin, end)``, asked for together and retried (``byte_ranges``)."""
        read_range = self.kind.read_range
        if read_range is None or not ranges:
            raise ConfigurationError(
                f"{self.url_of('')}: no byte ranges to read here (reads_ranges: {self.reads_ranges})"
            )
        reads = RangeReads([(self._path_of(rel), begin, end) for rel, begin, end in ranges])
        what = f"range reads of {self.url_of(ranges[0][0])} and {len(ranges) - 1} more"
        reader = self.reader
        if reader is not None:
            return self._retrying(what, lambda: reads.attempt_blocking(reader.read_range, self.timeout))
        return self._retrying(what, lambda: reads.attempt(self.fs, read_range, self.timeout))

    def with_retry(self, retry: int) -> RemoteStore:
        """This store, sharing its client, with ``retry`` attempts per file.

        Args:
            retry: total attempts per file (at least 1).
        """
        if not isinstance(retry, int) or retry < 1:
            raise ConfigurationError(f"retry must be an int >= 1 (total attempts per file), got {retry!r}")
        if self.reader is None:  # a store opened on first use: opened now, so that the twin shares its client
            self._open()
        twin = object.__new__(RemoteStore)
        twin.__dict__.update(self.__dict__, retry=retry)  # not copy.copy: pickling's state drops the client
        return twin

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace ``rel`` with ``data`` (atomically on local disks: temp file and rename)."""
        if self._is_local:
            path = self._written(rel)
            self._retrying(f"write of {self.url_of(rel)}", lambda: atomic_write(path, [data]))
            return
        self._retrying(f"write of {self.url_of(rel)}", lambda: self.fs.pipe_file(self._path_of(rel), data))
        kill_point(f"wrote {rel}")

    def write_if_absent(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` only if it does not exist; False if it already did (another writer won).

        The store's registry entry says how it makes this exclusive; ``mds_core.storage.exclusive``
        refuses stores that cannot. A retried attempt that finds the file may be finding its own
        earlier attempt (the reply was lost, not the write), so the file's bytes decide who won:
        ``data`` must be unique to the writer (a manifest names its transaction). On object stores even a first
        attempt may be a retry: aiohttp resends a PUT once, unseen, when a kept-alive connection drops.
        """
        scheme = self.scheme
        path = self._written(rel)
        tries = 0

        def attempt() -> bool:
            nonlocal tries
            tries += 1
            if create_if_absent(self.fs, scheme, path, data, self.url_of(rel)):
                return True
            return (tries > 1 or not self._is_local) and self._cat(path) == data

        created = self._retrying(f"conditional write of {self.url_of(rel)}", attempt)
        kill_point(f"conditional write of {rel}")
        return created

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists, retried on transient errors."""
        found: bool = self._retrying(f"lookup of {self.url_of(rel)}", lambda: self.fs.exists(self._path_of(rel)))
        return found

    def delete(self, rel: str) -> None:
        """Remove one file; a missing file is fine."""
        path = self._written(rel)

        def attempt() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(path)

        self._retrying(f"delete of {self.url_of(rel)}", attempt)
        kill_point(f"deleted {rel}")

    def delete_tree(self, rel: str) -> None:
        """Remove everything under ``rel``; a missing directory is fine."""
        path = self._written(rel)

        def attempt() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(path, recursive=True)

        self._retrying(f"delete of {self.url_of(rel)}", attempt)
        kill_point(f"deleted the tree {rel}")

    def list(self, rel: str = "", maxdepth: int | None = None) -> list[str]:
        """Every file under ``rel`` (``maxdepth`` folders deep at most), as paths relative to the store's root, sorted."""
        return sorted(self.sizes(rel, maxdepth))

    def sizes(self, rel: str = "", maxdepth: int | None = None) -> dict[str, int]:
        """Every file under ``rel`` and its size in bytes, keyed by its path relative to the store's root."""
        base = self.path.rstrip("/")

        def attempt() -> dict[str, int]:
            try:
                found = self.fs.find(self._path_of(rel), maxdepth=maxdepth, detail=True)
            except FileNotFoundError:
                return {}
            return {
                (p[len(base) + 1 :] if p.startswith(base + "/") else p): int(i.get("size") or 0)
                for p, i in found.items()
            }

        return self._retrying(f"listing of {self.url_of(rel)}", attempt)

    def move(self, src_rel: str, dst_rel: str) -> None:
        """Rename a file (a copy then delete on object stores)."""
        src, dst = self._written(src_rel), self._written(dst_rel)
        self._retrying(f"move of {self.url_of(src_rel)} to {self.url_of(dst_rel)}", lambda: self.fs.mv(src, dst))
        kill_point(f"moved {src_rel} to {dst_rel}")

    # ---------------------------------------------------------------------------------------------
    # machinery

    @property
    def scheme(self) -> str:
        """The URL scheme, ``file`` for a local path."""
        return "file" if self._is_local else urlparse(self.url).scheme

    @property
    def _is_local(self) -> bool:
        return not is_remote(self.url)

    def _written(self, rel: str) -> str:
        """The path of ``rel`` to write, move or delete; on a local disk never through a linked folder."""
        return beneath(self.path, rel) if self._is_local else self._path_of(rel)

    def _retrying(self, what: str, attempt: Callable[[], T], sleep: Callable[[float], None] | None = None) -> T:
        return retrying(
            what, attempt, retry=self.retry, timeout=self.timeout, advice_for=self.kind.advice_for, sleep=sleep
        )

    def _transfer(
        self, method: Callable[..., Any], src: str, dst: str, watch: FirstByteWatch | None = None, **kwargs: Any
    ) -> None:
        """One transfer under the deadline: cancelled (async stores) or abandoned between chunks."""
        if self._is_async:
            from fsspec.asyn import sync
            from fsspec.exceptions import FSTimeoutError

            if method == self._get_file and self.kind.get_file is not None:
                coro = self.kind.get_file(self.fs)
            else:
                coro = getattr(self.fs, "_" + method.__name__.lstrip("_"))
            try:
                sync(self.fs.loop, with_deadline, coro(src, dst, **kwargs), self.timeout, watch, kwargs.get("callback"))
            except FSTimeoutError:
                raise TimeoutError(f"did not finish within the {self.timeout} s timeout") from None
        else:
            method(src, dst, **kwargs)

    @property
    def _watches_first_bytes(self) -> bool:
        """A registered store whose client shows the store's answer (``body_limit``, ``answers_on_open``)."""
        if self.kind is FSSPEC_FALLBACK:
            return False
        return self.reader is not None or self.kind.answers_on_open or self._is_async  # the reader first: no s3fs

    @property
    def _is_async(self) -> bool:
        return bool(getattr(self.fs, "async_impl", False)) and getattr(self.fs, "loop", None) is not None

    def _download_to(self, rpath: str, lpath: str, limit: Bound | None, watch: FirstByteWatch | None) -> None:
        """One download attempt, ended as soon as the body passes ``limit`` (see ``transfer_limits``)."""
        if (reader := self.reader) is not None:
            download_blocking(reader, rpath, lpath, self.timeout, limit, watch)
        elif limit is None:
            self._transfer(self._get_file, rpath, lpath)
        elif self._is_async:  # the client's progress callback: one that never calls it is left to the size check
            run_bounded(lambda callback: self._transfer(self._get_file, rpath, lpath, watch, callback=callback), limit)
        else:
            self._get_file(rpath, lpath, limit, watch)

    def _get_file(
        self, rpath: str, lpath: str, limit: Bound | None = None, watch: FirstByteWatch | None = None
    ) -> None:
        download_blocking(self.fs, rpath, lpath, self.timeout, limit, watch)

    def _put_file(self, lpath: str, rpath: str) -> None:
        if self._is_local:
            with staged_path(rpath) as tmp:
                shutil.copyfile(lpath, tmp)
            return
        self.fs.put_file(lpath, rpath)


def open_store(
    url: str | os.PathLike[str],
    *,
    retry: int = 2,
    timeout: float | None = 60.0,
    storage_options: dict[str, Any] | None = None,
    any_fsspec: bool = False,
) -> RemoteStore:
    """A ``RemoteStore`` rooted at ``url`` (a local path, ``file://`` or any supported remote URL).

    ``any_fsspec=True`` also opens URLs whose scheme only fsspec knows (``memory://``, ``sftp://``...),
    through ``mds_core.storage.stores.fsspec_fallback``: our retries and deadlines, fsspec's clients.
    """
    return RemoteStore(
        os.fspath(url), retry=retry, timeout=timeout, storage_options=storage_options, any_fsspec=any_fsspec
    )
