"""Local files done safely: atomic replacement, exclusive creation, cross-process locks, process checks.

Every file this library publishes on a local disk goes through ``staged_path``: it is written under
a unique temporary name beside its final name and renamed into place only once complete, so a
crash never leaves a truncated file under a real name, and a failed write leaves nothing at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def staged_path(path: str) -> Iterator[str]:
    """A unique temporary path beside ``path``, renamed to ``path`` when the block succeeds.

    The caller writes the temporary file however it likes (a download, ``np.save``, a copy). On
    an exception the temporary file is removed and ``path`` is left as it was.
    """
    fd, tmp = _temporary_beside(path)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_file(path: str) -> Iterator[IO[bytes]]:
    """A binary file opened for writing that appears as ``path`` only once the block succeeds."""
    with staged_path(path) as tmp, open(tmp, "wb", buffering=1 << 20) as file:
        yield file


def atomic_write(path: str, parts: list[bytes]) -> None:
    """Replace ``path`` with the concatenation of ``parts``, atomically."""
    with atomic_file(path) as file:
        file.writelines(parts)


def create_exclusive(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if it does not exist yet; False if it already did.

    A complete temporary file is hard-linked to ``path``: linking fails if ``path`` exists, so of
    two writers exactly one wins, and nobody ever sees a partial file.
    """
    fd, tmp = _temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)


def _temporary_beside(path: str) -> tuple[int, str]:
    """A new, uniquely named file in ``path``'s directory (created if needed): same file system, so
    renaming or linking it to ``path`` is atomic."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    return tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """An exclusive lock over every process on this host that locks ``path`` (created if missing).

    Waiting blocks in the kernel (``flock``), never polls, and the kernel drops the lock if its
    holder dies, so a crashed process never leaves a stale lock behind.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def has_size(path: str, size: int) -> bool:
    """Whether ``path`` exists with exactly ``size`` bytes (a complete shard, say)."""
    try:
        return os.stat(path).st_size == size
    except FileNotFoundError:
        return False


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (someone else's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True
