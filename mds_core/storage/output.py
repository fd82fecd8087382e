"""Where a writer's files go: the one parser of ``out``, and the two kinds of output it leads to.

``out`` means the same everywhere (``MDSWriter``, ``merge_index``, ``dataframe_to_mds``):

* a local path or ``file://`` URL: the dataset is written there;
* a remote URL (``s3://...``): files are staged in a temporary directory and uploaded;
* ``(local, remote)``: files are staged in ``local`` and copied to ``remote``, the dataset's home
  (a URL or another local path). ``remote=None``, or the same path twice, means ``local`` alone.

Every file is written to a unique temporary name and renamed into place, so a crash never leaves
a truncated file under a final name, and ``index.json`` is published last.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mds_core.errors import MDSError, OutputExistsError, StoreFileNotFoundError, WriterError, chain_of
from mds_core.storage.files import atomic_write, remove_dataset
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.urls import is_remote, local_path

T = TypeVar("T")
INDEX = "index.json"
Out = str | os.PathLike[str] | tuple[str | None, str | None]


@dataclass(frozen=True)
class OutputLocation:
    """A parsed ``out``: the local directory files are written in, and the dataset's home if elsewhere.

    ``local`` is None when files are staged in a temporary directory; ``remote`` is None when the
    dataset lives in ``local`` itself. ``home`` is where the finished dataset is.
    """

    local: str | None
    remote: str | None

    @property
    def home(self) -> str:
        """The dataset's place: the remote URL if any, else the local directory."""
        return self.remote if self.remote is not None else self.local or ""


def parse_out(out: Out) -> OutputLocation:
    """The one reading of a writer's ``out`` (see the module docstring)."""
    if not isinstance(out, tuple):
        location = _normalise(os.fspath(out))
        return OutputLocation(None, location) if is_remote(location) else OutputLocation(location, None)
    if len(out) != 2:
        raise WriterError(f"out=(local, remote) must have two entries, got {out!r}")
    local, remote = (_normalise(os.fspath(part)) if part else None for part in out)
    if local is None and remote is None:
        raise WriterError("out=(None, None) names no location; give a path or a URL")
    if local is not None and is_remote(local):
        raise WriterError(f"out=(local, remote): local must be a local directory, got {local!r}")
    if local is None and remote is not None and not is_remote(remote):
        return OutputLocation(remote, None)  # nothing to stage elsewhere: write in place
    return OutputLocation(local, None if remote == local else remote)


def _normalise(location: str) -> str:
    return location.rstrip("/") if is_remote(location) else local_path(location)


class Output(Protocol):
    """What a writer needs from a destination."""

    location: str

    def write_file(self, basename: str, parts: Sequence[bytes | memoryview]) -> None:
        """Store one file of the dataset from ``parts``."""

    def publish_index(self, data: bytes) -> None:
        """Store ``index.json`` last, once every shard is stored."""

    def abort(self) -> None:
        """Remove what was written, after a failure."""


class LocalOutput:
    """A local directory. ``exist_ok=True`` empties it first, like the reference.

    ``durable``: each file is on disk, under its name, before the next is written, so the index
    (written last) never survives a power loss without the shards it names.
    """

    def __init__(self, directory: str, exist_ok: bool = False, durable: bool = True) -> None:
        self.location, self.durable = directory, durable
        self._written: list[str] = []
        if os.path.isdir(directory) and os.listdir(directory):
            if not exist_ok:
                raise OutputExistsError(
                    f"Directory is not empty: {directory}; pick a new path or pass exist_ok=True to replace it"
                )
            warnings.warn(f"exist_ok=True: removing the existing contents of {directory}", stacklevel=4)
            remove_dataset(directory)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as err:
            raise WriterError(f"cannot create output directory {directory}: {err}") from err

    def write_file(self, basename: str, parts: Sequence[bytes | memoryview]) -> None:
        """Write the file atomically in the directory."""
        atomic_write(os.path.join(self.location, basename), parts, durable=self.durable)
        self._written.append(basename)

    def publish_index(self, data: bytes) -> None:
        """Write ``index.json`` atomically in the directory."""
        atomic_write(os.path.join(self.location, INDEX), [data], durable=self.durable)

    def abort(self) -> None:
        """Remove what this writer wrote, so a failed run leaves no half-dataset behind."""
        for basename in self._written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.location, basename))
        self._written.clear()


class RemoteOutput:
    """Files staged in a local directory and uploaded in the background as each one is written.

    At most ``2 * max_workers`` files wait for upload, so local disk stays bounded; with
    ``keep_local=False`` each file is deleted once uploaded. ``index.json`` goes up only after every
    shard upload has succeeded, so a failed or killed writer never publishes an index.
    """

    def __init__(
        self,
        local: str | None,
        remote: str,
        *,
        keep_local: bool = False,
        exist_ok: bool = False,
        retry: int = 2,
        max_workers: int | None = None,
    ) -> None:
        self.location = remote
        self.store = open_store(remote, retry=retry, timeout=None)
        self.keep_local = keep_local
        self._staging_is_temporary = local is None
        # A temporary staging copy is deleted after upload: syncing it to disk would buy nothing.
        self._local = LocalOutput(
            local or tempfile.mkdtemp(prefix="mds-upload-"), exist_ok, durable=not self._staging_is_temporary
        )
        self._refuse_or_retract_index(exist_ok)
        workers = max_workers or 4
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mds-upload")
        self._slots = threading.BoundedSemaphore(2 * workers)
        self._uploads: list[Future[None]] = []
        self._uploaded: list[str] = []

    def _refuse_or_retract_index(self, exist_ok: bool) -> None:
        if not self.store.exists(INDEX):
            require_bucket(self.store)  # else found only at the first upload, after a shard's work
            return
        if not exist_ok:
            raise OutputExistsError(
                f"{self.store.url_of(INDEX)} already exists; write elsewhere or pass exist_ok=True to replace it"
            )
        # Retract the old index first: an interrupted overwrite must not leave it pointing at new shards.
        self.store.delete(INDEX)

    def write_file(self, basename: str, parts: Sequence[bytes | memoryview]) -> None:
        """Write the file in the local copy and queue its upload."""
        self._raise_first_failure()
        self._local.write_file(basename, parts)
        self._slots.acquire()
        future = self._pool.submit(self._upload, basename)
        future.add_done_callback(lambda _: self._slots.release())
        self._uploads.append(future)

    def _upload(self, basename: str) -> None:
        path = os.path.join(self._local.location, basename)
        self.store.upload(path, basename)
        self._uploaded.append(basename)
        if not self.keep_local:
            os.unlink(path)

    def _raise_first_failure(self, wait: bool = False) -> None:
        for future in self._uploads:
            if wait or future.done():
                result_of(future)  # raises the upload's StorageError

    def publish_index(self, data: bytes) -> None:
        """Wait for every upload, then write and upload ``index.json``."""
        self._raise_first_failure(wait=True)
        self._pool.shutdown(wait=True)
        self._local.publish_index(data)
        self.store.upload(os.path.join(self._local.location, INDEX), INDEX)
        if not self.keep_local:
            shutil.rmtree(self._local.location, ignore_errors=True)

    def abort(self) -> None:
        """Stop uploading; remove what was uploaded and the staging files. No index is published."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for basename in self._uploaded:
            with contextlib.suppress(MDSError):  # best effort: without an index.json the files are not a dataset anyway
                self.store.delete(basename)
        self._local.abort()
        if self._staging_is_temporary or not self.keep_local:
            shutil.rmtree(self._local.location, ignore_errors=True)


def require_bucket(store: RemoteStore) -> None:
    """``StoreFileNotFoundError`` if ``store``'s bucket (or container) is missing.

    Lookups and listings read a missing bucket as an empty folder, and a write would fail only at its first upload. One
    attempt, and only "not found" counts: a credential scoped to a prefix may not look at the bucket, and its upload
    will tell.
    """
    bucket, what = store.path.split("/", 1)[0], store.kind.bucket
    if what is None:
        return
    try:
        store.fs.info(bucket)
    except FileNotFoundError:
        raise StoreFileNotFoundError(
            f"{store.url_of('')}: the {what} {bucket!r} does not exist (or these credentials cannot see it); "
            "create it or check the URL"
        ) from None
    except Exception:  # no permission to look, say: the first upload reports what is wrong
        pass


def result_of(future: Future[T]) -> T:
    """``future.result()``, with an ``MDSError`` raised as if here.

    Its message names the file and the cause, so neither it nor its causes carry the background thread's frames into the
    caller's traceback.
    """
    try:
        return future.result()
    except MDSError as err:
        for cause in chain_of(err):
            cause.__traceback__ = None
        raise err from err.__cause__


def open_output(
    out: Out, exist_ok: bool = False, *, keep_local: bool = False, retry: int = 2, max_workers: int | None = None
) -> Output:
    """The output ``out`` names: a local directory, or local staging uploaded to the dataset's home."""
    location = parse_out(out)
    if location.remote is None:
        return LocalOutput(location.local or "", exist_ok)
    return RemoteOutput(
        location.local, location.remote, keep_local=keep_local, exist_ok=exist_ok, retry=retry, max_workers=max_workers
    )
