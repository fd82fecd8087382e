"""What every ``mds`` command shares: turning errors into one line and an exit status, rendering values,
and a local copy of a remote dataset's index (and shards) for the commands that read files."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import numpy as np

from mds_core.errors import MDSError
from mds_core.format.index import INDEX_BASENAME, parse_index
from mds_core.storage.remote import open_store
from mds_core.storage.urls import is_remote


def human(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "-"
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(num_bytes)


def show(value: Any, limit: int = 80) -> str:
    """A one-line, bounded rendering of a sample value."""
    if isinstance(value, np.ndarray):
        body = np.array2string(value.ravel()[:8], separator=", ", threshold=8, max_line_width=1 << 20)
        more = ", ..." if value.size > 8 else ""
        return f"ndarray {value.dtype} {value.shape} {body[:-1]}{more}]"
    if hasattr(value, "mode") and hasattr(value, "size") and hasattr(value, "getpixel"):
        return f"image {value.mode} {value.size[0]}x{value.size[1]}"
    if isinstance(value, list) and value and hasattr(value[0], "getpixel"):
        return "[" + ", ".join(show(item) for item in value) + "]"
    text = repr(value)
    return (
        text if len(text) <= limit else f"{text[:limit]}... ({len(value) if hasattr(value, '__len__') else '?'} long)"
    )


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def or_exit(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Turn an MDSError into a one-line message and exit status 2 instead of a traceback."""
    try:
        return func(*args, **kwargs)
    except MDSError as err:
        fail(str(err))


def emit(obj: Any, as_json: bool, lines: list[str]) -> None:
    click.echo(json.dumps(obj, indent=2, default=str) if as_json else "\n".join(lines))


@contextmanager
def local_copy(path: str, shards: bool) -> Iterator[str]:
    """A local directory for PATH: itself, or for a URL a temporary copy of its index (and shards)."""
    if not is_remote(path):
        if not os.path.isdir(path):
            fail(f"{path}: no such dataset directory")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="mds-cli-") as local:
        store = open_store(path)
        or_exit(store.download, INDEX_BASENAME, os.path.join(local, INDEX_BASENAME))
        if shards:
            index = or_exit(parse_index, open(os.path.join(local, INDEX_BASENAME), "rb").read(), path)
            for shard in index:
                info = shard.zip_data or shard.raw_data  # a compressed shard exists remotely only as its zip
                or_exit(store.download, info.basename, os.path.join(local, info.basename))
        yield local
