"""What every ``mds`` command shares: one error path (an ``MDSError`` becomes one line and exit status 2), rendering values,
and a local copy of a remote dataset's index (and shards) for the commands that read files."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NoReturn

import click
import numpy as np

from mds_core.errors import MDSError
from mds_core.format.index import INDEX_BASENAME, parse_index
from mds_core.storage.remote import open_store
from mds_core.storage.urls import is_remote


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


class CommandError(click.ClickException):
    """What every ``mds`` command reports on a failure: one line, ``error: ...``, and exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class CommandGroup(click.Group):
    """A group whose commands report an ``MDSError`` as a ``CommandError`` instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MDSError as err:
            raise CommandError(str(err)) from err


def fail(message: str) -> NoReturn:
    raise CommandError(message)


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
        store.download(INDEX_BASENAME, os.path.join(local, INDEX_BASENAME))
        if shards:
            index = parse_index(open(os.path.join(local, INDEX_BASENAME), "rb").read(), path)
            for shard in index:
                info = shard.zip_data or shard.raw_data  # a compressed shard exists remotely only as its zip
                store.download(info.basename, os.path.join(local, info.basename))
        yield local
