"""Shared checks: a comparable form of decoded values, the out-of-bounds test for numpy views, and the
state of a folder tree (what the hostile-input targets compare before and after each input)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from mds_core.errors import MDSError
from tests.fuzz.harness import PropertyFailure


def canon(value: Any) -> Any:
    """A form of a decoded value that compares by content (arrays by bytes, images by header and pixels)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return ("nd", value.dtype.str, np.shape(value), np.asarray(value).tobytes())
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canon(v) for v in value]
    if hasattr(value, "getpixel"):  # a PIL image; jpeg/png ones decode lazily, so only their header counts
        pixels = value.tobytes() if getattr(value, "format", None) is None else None
        return ("img", value.mode, value.size, getattr(value, "format", None), pixels)
    if isinstance(value, float) and value != value:
        return ("nan",)
    return value


def outcome(func: Any, *args: Any) -> Any:
    """``canon`` of the result, or the MDSError's type: what two read paths must agree on."""
    try:
        return canon(func(*args))
    except MDSError as err:
        return ("error", type(err).__name__)


def attempt(call: Callable[..., Any], *args: Any) -> None:
    """Run ``call``; an ``MDSError`` is an expected outcome, so the next read is tried too."""
    with suppress(MDSError):
        call(*args)


def short(value: Any) -> str:
    """A decompression's outcome for a failure message: its size, or what it was instead of bytes."""
    if value is None:
        return "refused"
    return f"{len(value)} bytes" if isinstance(value, bytes) else str(value)


def check_views_inside(value: Any, base: np.ndarray, begin: int, end: int, where: str) -> None:
    """Every numpy array in ``value`` that views ``base`` lies within ``base[begin:end]``.

    A view that reaches past the sample's bytes is an out-of-bounds read even when the result
    looks plausible: it shows bytes of the next sample, or of the header.
    """
    if isinstance(value, (dict, list)):
        for v in value.values() if isinstance(value, dict) else value:
            check_views_inside(v, base, begin, end, where)
    elif isinstance(value, np.ndarray) and value.nbytes and np.shares_memory(value, base):
        start = value.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        if start < begin or start + value.nbytes > end:
            raise PropertyFailure(
                "out-of-bounds view", f"{where}: array at bytes {start}-{start + value.nbytes} outside {begin}-{end}"
            )
    elif isinstance(value, (bytes, str)) and len(value) > (end - begin) * (1 if isinstance(value, bytes) else 4):
        raise PropertyFailure("out-of-bounds bytes", f"{where}: {len(value)} bytes from a {end - begin}-byte sample")


def tree_state(root: str) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root`` (``root`` itself as ``"."``; a file or link alone if ``root`` is one), never
    following a link: its type, size, mtime and, for a file, a digest of its bytes; for a link, where it
    points. Two states compare equal only if nothing was created, removed, written, touched or re-pointed."""
    state = {".": _entry_state(root)}
    for parent, dirs, names in os.walk(root) if state["."][0] == "dir" else ():
        for name in dirs + names:
            path = os.path.join(parent, name)
            state[os.path.relpath(path, root)] = _entry_state(path)
    return state


def _entry_state(path: str) -> tuple[Any, ...]:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha1(Path(path).read_bytes()).hexdigest()
        return ("file", info.st_size, info.st_mtime_ns, info.st_mode, digest)
    return ("dir", info.st_mtime_ns, info.st_mode)


def changed_entries(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    """The entries whose state differs (created, removed or changed), sorted."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
