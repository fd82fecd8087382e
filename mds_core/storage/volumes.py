"""Unity Catalog volumes (``dbfs:/Volumes/<catalog>/<schema>/<volume>/...``) through the Databricks Files API.

``VolumesFileSystem`` is a small fsspec filesystem over the official SDK's ``WorkspaceClient().files``,
with what ``RemoteStore`` uses: reads (streamed), writes, an exclusive create, listings, metadata,
deletes and moves. Each method is one documented Files API request (``/api/2.0/fs/files``,
``/api/2.0/fs/directories``), or a few for listings and recursive deletes:

* **Credentials** come from the SDK's default chain: ``DATABRICKS_HOST`` with ``DATABRICKS_TOKEN``,
  a ``~/.databrickscfg`` profile (``DATABRICKS_CONFIG_PROFILE``), an OAuth service principal
  (``DATABRICKS_CLIENT_ID``/``DATABRICKS_CLIENT_SECRET``), or whatever else the SDK supports. The
  storage options ``host``, ``token`` and ``profile`` (and any other SDK ``Config`` field) override it.
* **One attempt per call.** ``RemoteStore`` counts attempts itself, and a conditional create retried
  inside the client after a lost reply would find its own file and report a lost race. The SDK
  retries 429, 503 and connection errors until its clock passes a deadline; the client gets a clock
  that jumps past any deadline when the SDK sleeps, so the SDK gives up after the first attempt,
  without sleeping, and the error it gave up on is raised. A 429 or 503 becomes ``Throttled`` with
  the answer's ``Retry-After``, which ``RemoteStore`` waits for within the file's deadline.
* **The plain Files API.** The SDK's newer transfer client (presigned cloud URLs, parallel parts) is
  switched off (``disable_experimental_files_api_client``): it has retry loops of its own. A file is
  uploaded in one request, which the Files API limits to 5 GiB.
* **Exclusive create**: an upload with ``overwrite=false``, which the Files API refuses with 409
  Conflict if the file exists; that becomes ``FileExistsError``.
* **Errors**: 404 is ``FileNotFoundError``, 401 and 403 are ``PermissionError`` naming the URL and
  what to fix, and a socket timeout is ``TimeoutError``; ``RemoteStore`` retries only the others.
* **Paths** keep ``#`` and ``?``, which are legal in volume file names (``volume_path``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import shutil
import tempfile
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, BinaryIO, TypeVar

from fsspec import AbstractFileSystem

from mds_core.errors import ConfigurationError
from mds_core.storage.volumes_client import translate_error, workspace_client

T = TypeVar("T")


def volumes(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """(filesystem, path) for a ``dbfs:/Volumes/...`` root URL."""
    path = volume_path(url)
    return VolumesFileSystem(url=url, timeout=timeout, **options), path


def volume_path(url: str) -> str:
    """``/Volumes/<catalog>/<schema>/<volume>/...`` from the URL; anything else is refused.

    ``#`` and ``?`` are legal in volume file names, so they stay in the path: ``urlparse`` would take
    them for a fragment and a query and drop them, and the data would be written elsewhere.
    """
    rest = url.partition(":")[2]
    netloc, _, path = rest[2:].partition("/") if rest.startswith("//") else ("", "", rest)
    parts = path.strip("/").split("/")
    if {".", ".."} & set(parts):  # the Files API would resolve them, out of the volume named
        raise ConfigurationError(f"{url}: '.' and '..' are not allowed in a volume path; write the path they mean")
    if netloc or len(parts) < 4 or parts[0] != "Volumes" or "" in parts:
        raise ConfigurationError(
            f"{url}: only Unity Catalog volumes are supported on dbfs:, as "
            f"dbfs:/Volumes/<catalog>/<schema>/<volume>/<path> (read and written through the Databricks Files "
            f"API). Legacy DBFS paths (dbfs:/FileStore, dbfs:/mnt, ...) are not: move the data to a volume, or "
            f"use the cloud store behind the mount (s3://, gs://, abfss://)"
        )
    return "/" + "/".join(parts)


# fsspec ships no type information, so its base class is Any to mypy.
class VolumesFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """Files in Unity Catalog volumes, through ``WorkspaceClient().files`` (one request per call, no retries)."""

    protocol = "dbfs"
    root_marker = "/"
    cachable = False

    def __init__(self, *, url: str = "dbfs:/Volumes", timeout: float | None = None, **options: Any) -> None:
        super().__init__()
        self.url, self.timeout = url, timeout
        self.client = workspace_client(url, timeout, options)
        self.files = self.client.files

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        if text.startswith("dbfs:"):
            text = text[len("dbfs:") :]
        return "/" + text.strip("/")

    # ---------------------------------------------------------------------------------------------
    # reads

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> _Download:
        if mode != "rb":
            raise NotImplementedError(f"{self._url(path)}: only mode 'rb'; write with pipe_file or put_file")
        path = self._strip_protocol(path)
        response = self._call(path, self.files.download, path)
        return _Download(response.contents, self, path)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """The file's bytes (from ``start`` to ``end`` if given)."""
        with self._open(path) as source:
            data = source.read()
        return data[start:end] if start is not None or end is not None else data

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """The file's or directory's fsspec entry."""
        path = self._strip_protocol(path)
        try:
            meta = self._call(path, self.files.get_metadata, path)
        except FileNotFoundError:
            self._call(path, self.files.get_directory_metadata, path)  # FileNotFoundError if neither
            return {"name": path, "size": 0, "type": "directory"}
        return {
            "name": path,
            "size": meta.content_length,
            "type": "file",
            **_modified(parsedate_to_datetime(meta.last_modified) if meta.last_modified else None),
        }

    def exists(self, path: str, **kwargs: Any) -> bool:
        """Only a 404 means "no": a refused token or a failed request is raised, not taken for absence."""
        try:
            self.info(path)
            return True
        except FileNotFoundError:
            return False

    def modified(self, path: str) -> dt.datetime:
        """When the file was last modified."""
        modified: dt.datetime = self.info(path)["LastModified"]  # what _modified puts there
        return modified

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """The directory's entries (their fsspec entries with ``detail``, else their paths)."""
        path = self._strip_protocol(path)
        try:
            entries = self._entries(path)
        except FileNotFoundError:
            entries = [self.info(path)]  # a file lists as itself; FileNotFoundError if missing
        return entries if detail else [e["name"] for e in entries]

    def find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any
    ) -> Any:
        """Every file under ``path`` (a directory, recursively, page by page), or ``path`` if it is a file."""
        path = self._strip_protocol(path)
        found: dict[str, dict[str, Any]] = {}
        try:
            pending = [(path, self._entries(path), 1)]
        except FileNotFoundError:
            with contextlib.suppress(FileNotFoundError):
                found[path] = self.info(path)
            pending = []
        while pending:
            _, entries, depth = pending.pop()
            for entry in entries:
                if entry["type"] == "directory":
                    if withdirs:
                        found[entry["name"]] = entry
                    if maxdepth is None or depth < maxdepth:
                        pending.append((entry["name"], self._entries(entry["name"]), depth + 1))
                else:
                    found[entry["name"]] = entry
        found = dict(sorted(found.items()))
        return found if detail else list(found)

    def _entries(self, path: str) -> list[dict[str, Any]]:
        """One directory's entries, following ``next_page_token`` (the SDK's iterator does)."""
        listing = self._call(path, lambda: list(self.files.list_directory_contents(path)))
        entries = []
        for entry in listing:
            name = (entry.path or f"{path}/{entry.name}").rstrip("/")
            if entry.is_directory:
                entries.append({"name": name, "size": 0, "type": "directory"})
            else:
                stamp = entry.last_modified
                modified = dt.datetime.fromtimestamp(stamp / 1000, dt.UTC) if stamp is not None else None
                entries.append({"name": name, "size": entry.file_size or 0, "type": "file", **_modified(modified)})
        return entries

    # ---------------------------------------------------------------------------------------------
    # writes

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """``mode="create"`` uploads with ``overwrite=false``: FileExistsError if the file exists (409)."""
        path = self._strip_protocol(path)
        self._upload(path, io.BytesIO(value), overwrite=mode != "create")

    def put_file(self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any) -> None:
        """Upload the local file ``lpath`` to ``rpath``; ``mode="create"`` refuses an existing file."""
        rpath = self._strip_protocol(rpath)
        with open(lpath, "rb") as source:
            self._upload(rpath, source, overwrite=mode != "create")

    def _upload(self, path: str, contents: Any, overwrite: bool) -> None:
        """One upload.

        If the service answers 404 because the parent directory is missing, the directory is created (``mkdir -p``) and
        the upload sent once more.
        """
        start = contents.tell()
        try:
            self._call(path, self.files.upload, path, contents, overwrite=overwrite)
        except FileNotFoundError:
            self._call(path, self.files.create_directory, path.rsplit("/", 1)[0])
            contents.seek(start)
            self._call(path, self.files.upload, path, contents, overwrite=overwrite)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copy ``path1`` to ``path2`` through a local spool (the Files API has no copy)."""
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        with tempfile.TemporaryFile() as spool:
            with self._open(path1) as source:
                shutil.copyfileobj(source, spool, 8 << 20)
            spool.seek(0)
            self._upload(path2, spool, overwrite=True)

    def mv(self, path1: str, path2: str, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        """A copy, then a delete of the source (the Files API has no rename)."""
        self.cp_file(path1, path2)
        self.rm_file(path1)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Create the directory and its parents."""
        path = self._strip_protocol(path)
        self._call(path, self.files.create_directory, path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Create the directory and its parents (an existing one is fine)."""
        self.mkdir(path)

    def rm_file(self, path: str) -> None:
        """Delete one file."""
        path = self._strip_protocol(path)
        self._call(path, self.files.delete, path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Delete files, and with ``recursive`` a directory's tree.

        Files first, then the emptied directories, deepest first. A volume's root directory is emptied, never deleted.
        """
        if isinstance(path, (list, tuple)):
            for one in path:
                self.rm(one, recursive=recursive, maxdepth=maxdepth)
            return
        path = self._strip_protocol(path)
        if not recursive:
            self.rm_file(path)
            return
        entries = self.find(path, withdirs=True, detail=True)
        if list(entries) == [path] and entries[path]["type"] == "file":
            self.rm_file(path)
            return
        if not entries and not self._is_directory(path):
            raise FileNotFoundError(f"{self._url(path)}: no such file or directory")
        for name, entry in entries.items():
            if entry["type"] == "file":
                self.rm_file(name)
        directories = [name for name, entry in entries.items() if entry["type"] == "directory"]
        if path.count("/") > 4:  # /Volumes/<catalog>/<schema>/<volume>/<directory>...
            directories.append(path)
        for name in sorted(directories, key=lambda d: d.count("/"), reverse=True):
            with contextlib.suppress(FileNotFoundError):
                self._call(name, self.files.delete_directory, name)

    def _is_directory(self, path: str) -> bool:
        try:
            self._call(path, self.files.get_directory_metadata, path)
            return True
        except FileNotFoundError:
            return False

    # ---------------------------------------------------------------------------------------------
    # errors

    def _url(self, path: str) -> str:
        return f"dbfs:{path}"

    def _call(self, path: str, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return operation(*args, **kwargs)
        except Exception as err:
            translated = translate_error(err, self._url(path), self.timeout, operation, self.client.config.host)
            if translated is err:
                raise
            raise translated from err


class _Download(io.RawIOBase):
    """A download's body, streamed: errors while reading are translated like those of the request."""

    def __init__(self, contents: BinaryIO, fs: VolumesFileSystem, path: str) -> None:
        super().__init__()
        self._contents, self._fs, self._path = contents, fs, path

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._fs._call(self._path, self._contents.read, -1 if size is None else size)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._contents.close()
        super().close()


def _modified(stamp: dt.datetime | None) -> dict[str, Any]:
    """What ``vacuum`` reads for a file's age (``LastModified``, else ``mtime``)."""
    if stamp is None:
        return {}
    stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    return {"LastModified": stamp, "mtime": stamp.timestamp()}
