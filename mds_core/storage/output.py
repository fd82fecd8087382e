"""Where a writer's files go. Today a local directory; remote stores plug in behind the same methods.

Every file is written to a unique temporary name and renamed into place, so a crash never leaves
a truncated file under a final name, and ``index.json`` is published last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from typing import Protocol
from urllib.parse import urlparse

from mds_core.errors import OutputExistsError, WriterError


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


def open_output(out: str | os.PathLike[str] | tuple[str, str], exist_ok: bool = False) -> Output:
    """Resolve a writer's ``out`` argument to an ``Output``."""
    if isinstance(out, tuple):
        local, remote = out
        if remote and os.fspath(remote) != os.fspath(local):
            raise WriterError(f"uploading to {remote!r} is not supported yet; write to a local directory")
        return LocalOutput(os.fspath(local), exist_ok)
    out = os.fspath(out)
    if is_url(out):
        raise WriterError(f"remote output {out!r} is not supported yet; write to a local directory")
    return LocalOutput(out, exist_ok)


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
