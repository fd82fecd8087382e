"""Where a writer's files go: a local directory, or a local staging directory uploaded to a remote store.

Every file is written to a unique temporary name and renamed into place, so a crash never leaves
a truncated file under a final name, and ``index.json`` is published last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol
from urllib.parse import urlparse

from mds_core.errors import MDSError, OutputExistsError, WriterError

INDEX = "index.json"


class Output(Protocol):
    """What a writer needs from a destination."""

    location: str

    def write_file(self, basename: str, parts: list[bytes]) -> None: ...

    def publish_index(self, data: bytes) -> None: ...

    def abort(self) -> None: ...


class LocalOutput:
    """A local directory. ``exist_ok=True`` empties it first, like the reference."""

    def __init__(self, directory: str, exist_ok: bool = False) -> None:
        self.location = directory
        self._written: list[str] = []
        if os.path.isdir(directory) and os.listdir(directory):
            if not exist_ok:
                raise OutputExistsError(
                    f"directory is not empty: {directory}; pick a new path or pass exist_ok=True to replace it"
                )
            warnings.warn(f"exist_ok=True: removing the existing contents of {directory}", stacklevel=4)
            shutil.rmtree(directory)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as err:
            raise WriterError(f"cannot create output directory {directory}: {err}") from err

    def write_file(self, basename: str, parts: list[bytes]) -> None:
        atomic_write(os.path.join(self.location, basename), parts)
        self._written.append(basename)

    def publish_index(self, data: bytes) -> None:
        atomic_write(os.path.join(self.location, "index.json"), [data])

    def abort(self) -> None:
        """Remove what this writer wrote, so a failed run leaves no half-dataset behind."""
        for basename in self._written:
            try:
                os.unlink(os.path.join(self.location, basename))
            except FileNotFoundError:
                pass
        self._written.clear()


class RemoteOutput:
    """Files staged in a local directory and uploaded in the background as each one is written.

    At most ``2 * max_workers`` files wait for upload, so local disk stays bounded; with
    ``keep_local=False`` each file is deleted once uploaded. ``index.json`` goes up only after every
    shard upload has succeeded, so a failed or killed writer never publishes an index.
    """

    def __init__(self, local: str | None, remote: str, *, keep_local: bool = False, exist_ok: bool = False,
                 retry: int = 2, max_workers: int | None = None) -> None:
        from mds_core.storage.remote import open_store

        self.location = remote
        self.store = open_store(remote, retry=retry, timeout=None)
        self.keep_local = keep_local
        self._staging_is_temporary = local is None
        self._local = LocalOutput(local or tempfile.mkdtemp(prefix="mds-upload-"), exist_ok)
        self._refuse_or_retract_index(exist_ok)
        workers = max_workers or 4
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mds-upload")
        self._slots = threading.BoundedSemaphore(2 * workers)
        self._uploads: list[Future[None]] = []
        self._uploaded: list[str] = []

    def _refuse_or_retract_index(self, exist_ok: bool) -> None:
        if not self.store.exists(INDEX):
            return
        if not exist_ok:
            raise OutputExistsError(
                f"{self.store.url_of(INDEX)} already exists; write elsewhere or pass exist_ok=True to replace it"
            )
        # Retract the old index first: an interrupted overwrite must not leave it pointing at new shards.
        self.store.delete(INDEX)

    def write_file(self, basename: str, parts: list[bytes]) -> None:
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
                future.result()  # raises the upload's StorageError

    def publish_index(self, data: bytes) -> None:
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
            try:
                self.store.delete(basename)
            except MDSError:
                pass  # best effort: without an index.json the files are not a dataset anyway
        self._local.abort()
        if self._staging_is_temporary or not self.keep_local:
            shutil.rmtree(self._local.location, ignore_errors=True)


def open_output(
    out: str | os.PathLike[str] | tuple[str, str],
    exist_ok: bool = False,
    *,
    keep_local: bool = False,
    retry: int = 2,
    max_workers: int | None = None,
) -> Output:
    """Resolve a writer's ``out``: a local directory, a remote URL, or ``(local, remote)``."""
    from mds_core.storage.remote import is_remote, local_path

    if isinstance(out, tuple):
        local, remote = (os.fspath(part) if part is not None else None for part in out)
        if remote is None or remote == local:
            return LocalOutput(local_path(local), exist_ok)
        return RemoteOutput(local, remote, keep_local=keep_local, exist_ok=exist_ok, retry=retry,
                            max_workers=max_workers)
    out = os.fspath(out)
    if is_remote(out):
        return RemoteOutput(None, out, keep_local=keep_local, exist_ok=exist_ok, retry=retry,
                            max_workers=max_workers)
    return LocalOutput(local_path(out), exist_ok)


def is_url(path: str) -> bool:
    scheme = urlparse(path).scheme
    return len(scheme) > 1  # a single letter is a Windows drive, not a scheme


def atomic_write(path: str, parts: list[bytes]) -> None:
    """Write ``parts`` to a unique temporary file beside ``path``, then rename it into place."""
    directory = os.path.dirname(path) or "."
    fd, tmp_path = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as file:
            file.writelines(parts)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise
