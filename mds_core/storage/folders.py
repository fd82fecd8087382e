"""Folders only this user may use, and paths that stay inside their folder.

A cache or job folder in a shared temp folder (``/tmp``) has a name anyone can predict, so another
user can create it first: to read what is cached there, to plant shards and indexes, or to lock the
owner out. ``private_folder`` creates such a folder 0700, or accepts an existing one only when it is
a real folder (not a link) of this user's that nobody else can write, as ssh-agent, tmux and pip do.
``inside`` resolves a path and refuses one that a symbolic link leads out of its folder, before any
write, decompression or delete.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

from mds_core.errors import MDSError, StorageError, UnsafeFolderError, UnsafePathError


def private_folder(path: str, fix: str) -> str:
    """``path`` as a folder only this user can use: created 0700, or an existing one checked.

    An existing folder must be a real folder (``lstat``: not a link), owned by this user and
    writable by nobody else. One that others may only read (an earlier release made the cache's
    0755) is made 0700. ``fix`` says how to choose another folder (an argument, a variable).
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    _check_parent(parent, path, fix)
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    info = os.lstat(path)
    problem = _problem(info, stat.S_IWGRP | stat.S_IWOTH)
    if problem:
        raise UnsafeFolderError(
            f"{path} {problem}, so it is not a private folder of yours (uid {os.getuid()}): another user may "
            f"have made it to read or replace your data. Remove it if it is yours, or {fix}"
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)  # only readable by others, never writable: nothing in it came from them
    return path


def owned_folder(path: str, fix: str) -> str:
    """``path`` (followed if a link: a folder the user chose) as a folder of this user's that not every user can write.

    Created 0700 if missing. Group write is allowed: with a private group per user (Ubuntu's default umask 002), a
    user's folders are group-writable and still theirs alone.
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    problem = _problem(info, stat.S_IWOTH)
    if problem:
        raise UnsafeFolderError(
            f"{path} {problem}: files others put there would be read as your data. Use a folder of your own, or {fix}"
        )
    return path


def inside(root: str, rel: str) -> str:
    """``root/rel``, refused (``UnsafePathError``) when it resolves outside ``root`` through a symbolic link."""
    path = os.path.join(root, rel)
    base, real = os.path.realpath(root), os.path.realpath(path)
    if not real.startswith(base.rstrip(os.sep) + os.sep):
        raise UnsafePathError(
            f"{path}: resolves to {real}, outside {root} (through a symbolic link); nothing is written, "
            "decompressed or deleted outside the dataset's folder"
        )
    return path


def beneath(root: str, rel: str) -> str:
    """``root/rel``, refused (``UnsafePathError``) when a folder on the way down from ``root`` is a symbolic link.

    The file itself may be one: it is replaced or removed, never written through.
    """
    path = os.path.join(root, rel)
    expected = os.path.normpath(os.path.join(os.path.realpath(root), os.path.dirname(rel)))
    if os.path.realpath(os.path.dirname(path)) != expected:
        raise UnsafePathError(
            f"{path}: a folder on its way from {root} is a symbolic link; nothing is written, moved or deleted "
            "through one"
        )
    return path


@contextlib.contextmanager
def cache_errors(root: str) -> Iterator[None]:
    """An ``OSError`` from a cache's own files as a ``StorageError`` naming the file and the way out.

    A cache is a folder the user may have edited by hand: a folder or a link where a shard or a lock
    file belongs, a file where a folder belongs. None of that is the remote's data, and removing the
    cache folder is always safe (whatever it held is downloaded again).
    """
    try:
        yield
    except MDSError:
        raise
    except OSError as err:
        where = err.filename or root
        raise StorageError(
            f"{where}: the cache at {root} holds something it cannot use ({err.strerror or err}); "
            "remove that entry, or the cache folder (nothing in it is lost: it is downloaded again)"
        ) from err


def _problem(info: os.stat_result, writable: int) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid != os.getuid():
        return f"belongs to uid {info.st_uid}"
    if info.st_mode & writable:
        return f"is writable by other users (mode {stat.filemode(info.st_mode)})"
    return None


def _check_parent(parent: str, path: str, fix: str) -> None:
    """A parent anyone may write without the sticky bit lets anyone swap ``path`` after it is checked."""
    mode = os.stat(parent).st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise UnsafeFolderError(
            f"{path}: its folder {parent} is writable by every user and not sticky (mode {stat.filemode(mode)}), "
            f"so anyone can replace it; {fix}"
        )
