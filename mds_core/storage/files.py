"""Local files done safely: atomic replacement, exclusive creation, cross-process locks, process checks.

Every file this library publishes on a local disk goes through ``staged_path``: it is written under
a unique temporary name beside its final name and renamed into place only once complete, so a
crash never leaves a truncated file under a real name, and a failed write leaves nothing at all.

Published files are also durable: the file is ``fsync``ed before the rename and its directory after
it, so once a call returns, a power loss keeps the file, whole, under its name. Since every file is
durable before the call that writes it returns, a file written later that names it (an index naming
shards, a manifest naming an index) can never survive a crash without it. Caches and per-job files,
which are rebuilt when lost, pass ``durable=False`` and skip the two syncs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator, Sequence
from typing import IO

from mds_core.errors import PlatformError
from mds_core.format.index import INDEX_BASENAME
from mds_core.storage.kill_points import kill_point

try:
    import fcntl
except ImportError:  # not POSIX (Windows): reading local datasets works; streaming coordination does not
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def staged_path(path: str, durable: bool = True) -> Iterator[str]:
    """A unique temporary path beside ``path``, renamed to ``path`` when the block succeeds.

    The caller writes (and closes) the temporary file however it likes (a download, ``np.save``, a
    copy). On an exception the temporary file is removed and ``path`` is left as it was. ``durable``:
    the file's data, then its new name, reach the disk before the block's exit returns.
    """
    fd, tmp = _temporary_beside(path)
    os.close(fd)
    try:
        yield tmp
        if durable:
            fsync_file(tmp)
        kill_point(f"written, not yet renamed: {os.path.basename(path)}")
        os.replace(tmp, path)
        if durable:
            fsync_directory(os.path.dirname(path))
        kill_point(f"renamed into place: {os.path.basename(path)}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_file(path: str, durable: bool = True) -> Iterator[IO[bytes]]:
    """A binary file opened for writing that appears as ``path`` only once the block succeeds."""
    with staged_path(path, durable) as tmp, open(tmp, "wb", buffering=1 << 20) as file:
        yield file


def atomic_write(path: str, parts: Sequence[bytes | memoryview], durable: bool = True) -> None:
    """Replace ``path`` with the concatenation of ``parts``, atomically (and durably, by default)."""
    with atomic_file(path, durable) as file:
        file.writelines(parts)


def fsync_file(path: str) -> None:
    """Flush a closed file's data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: str) -> None:
    """Make the names created or renamed in ``directory`` durable: without it, a crash can lose them."""
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        # Some file systems (certain FUSE and network mounts) cannot sync a directory; they order
        # metadata themselves or not at all, and there is nothing more to do here.
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


# link() refused by the file system rather than failed: FUSE mounts such as Databricks' /Volumes,
# and some network and object-store mounts, have no hard links.
_LINK_REFUSED = {errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK}


def create_exclusive(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if it does not exist yet; False if it already did.

    A complete temporary file is hard-linked to ``path``: linking fails if ``path`` exists, so of
    two writers exactly one wins, and nobody ever sees a partial file. Where the file system refuses
    hard links, ``_create_by_open`` creates ``path`` itself with ``O_CREAT | O_EXCL``: still exactly
    one winner, but the file is visible while it is written (see there).
    """
    fd, tmp = _temporary_beside(path)
    try:
        _write_synced(fd, data)
        kill_point(f"written, not yet linked: {os.path.basename(path)}")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as err:
            if err.errno not in _LINK_REFUSED:
                raise
            return _create_by_open(path, data)
        fsync_directory(os.path.dirname(path))
        kill_point(f"linked into place: {os.path.basename(path)}")
        return True
    finally:
        os.unlink(tmp)


def _write_synced(fd: int, data: bytes) -> None:
    """Write ``data`` to the new file ``fd``, on the disk before returning; closes ``fd``."""
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _create_by_open(path: str, data: bytes) -> bool:
    """``create_exclusive`` without hard links: ``open(O_CREAT | O_EXCL)``, then write, sync and read back.

    The exclusive open decides the winner, so exactly one writer still wins. Unlike a link, the name
    exists before its bytes: a reader can meet the file empty or short while it is written, and a
    crash during the write leaves it so. For a shard set's manifest, readers then raise
    ``InvalidManifestError`` naming the file, and a commit of that version number loses. A short or
    failed write that this process sees (an error, or a read-back that differs) removes the file
    before raising, so the create can be tried again. Across nodes sharing a mount, the create is only
    as exclusive as the mount's ``O_EXCL``.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # less the umask, like any file
    except FileExistsError:
        return False
    try:
        _write_synced(fd, data)
        kill_point(f"created and written: {os.path.basename(path)}")
        with open(path, "rb") as file:
            if file.read() != data:
                raise OSError(errno.EIO, f"{path}: the bytes read back differ from those written")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    fsync_directory(os.path.dirname(path))
    return True


def _temporary_beside(path: str) -> tuple[int, str]:
    """A new, uniquely named file in ``path``'s directory (created if needed).

    Same file system, so renaming or linking it to ``path`` is atomic.

    Created with mode 0666 less the umask, like any file a program writes (``mkstemp`` would make it
    0600, and a training job running as another user could not read the published shards). The pid
    in the name lets ``remove_orphaned_temporaries`` tell a dead writer's file from a live one's.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    prefix = f"{os.path.basename(path)}.{os.getpid()}."
    while True:
        tmp = os.path.join(directory, prefix + secrets.token_hex(4) + _TEMPORARY_SUFFIX)
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


_TEMPORARY_SUFFIX = ".tmp"
_TEMPORARY_NAME = re.compile(r"\.(\d+)\.[^./]+\.tmp$")


def is_temporary_of(name: str, target: str) -> bool:
    """Whether ``name`` has the form of a temporary file made for the file named ``target`` (basenames)."""
    return name.startswith(f"{target}.") and _TEMPORARY_NAME.fullmatch(name, len(target)) is not None


def remove_orphaned_temporaries(directory: str, min_age: float = 60.0) -> list[str]:
    """Delete the temporary files that killed processes left under ``directory``; returns their paths.

    A temporary file is orphaned when the process named in it is gone and it has not changed for
    ``min_age`` seconds (a second condition in case the directory is shared across pid namespaces).
    """
    removed = []
    cutoff = time.time() - min_age
    for parent, _, names in os.walk(directory):
        for name in names:
            match = _TEMPORARY_NAME.search(name)
            if match is None or process_alive(int(match.group(1))):
                continue
            path = os.path.join(parent, name)
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_mtime < cutoff:
                    os.unlink(path)
                    removed.append(path)
    return removed


def remove_dataset(directory: str) -> None:
    """Remove a dataset directory, ``index.json`` first.

    A crash halfway never leaves an index naming shards that are already gone.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, INDEX_BASENAME))
        fsync_directory(directory)
        kill_point(f"retracted the index of {os.path.basename(directory)}")
    shutil.rmtree(directory)


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """An exclusive lock over every process on this host that locks ``path`` (created if missing).

    Waiting blocks in the kernel (``flock``), never polls, and the kernel drops the lock if its
    holder dies, so a crashed process never leaves a stale lock behind. A process forked while
    another thread holds it does not hold it too (``_close_inherited_locks``).
    """
    require_file_locks(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)  # never through a link
    _HELD.add(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        _HELD.discard(fd)
        os.close(fd)  # closing the descriptor releases the lock


# The descriptors of the locks this process holds or waits for: the only module state here. A flock
# belongs to the open file description, which a forked child shares through the descriptors it
# inherits, and it lasts until every copy is closed. So a DataLoader worker forked while a thread of
# its parent held a lock (the epoch's order is made on a thread behind the first batches) would hold
# that lock for its whole life, and every other process waiting for it would wait as long.
_HELD: set[int] = set()


def _close_inherited_locks() -> None:
    """In a forked child: close the copies of the parent's lock descriptors (the parent keeps its locks)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)


def require_file_locks(what: str) -> None:
    """Raise ``PlatformError`` where ``fcntl.flock`` is missing: job directories and shard caches need it."""
    if fcntl is None:
        raise PlatformError(
            f"{what}: streaming coordination (job directories, cross-process file locks) needs a POSIX "
            "system (Linux or macOS), and this Python has no fcntl module; LocalDataset still reads local datasets"
        )


def has_size(path: str, size: int) -> bool:
    """Whether ``path`` exists with exactly ``size`` bytes (a complete shard, say)."""
    try:
        return os.stat(path).st_size == size
    except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: a file where a folder on the way belongs
        return False
    except OSError as err:
        if err.errno == errno.ELOOP:  # a loop of links: no file there either (writing replaces the link)
            return False
        raise


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
