"""What every ``mds`` command shares.

One error path (an ``MDSError`` becomes one line and exit status 2), rendering values, and a local copy of a remote
dataset's index (and shards) for the commands that read files.
"""

from __future__ import annotations

import json
import os
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NoReturn

import click
import numpy as np

from mds_core.errors import MDSError
from mds_core.format.index import INDEX_BASENAME, MAX_INDEX_BYTES, parse_index
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


# Bidirectional overrides and isolates reorder what a terminal shows (the "Trojan Source" trick).
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def show_text(text: object) -> str:
    r"""``text`` safe to print: control characters escaped (``\x1b``), line breaks kept.

    Column names, manifest fields and error messages come from datasets written by anyone; an escape
    sequence in them would be obeyed by the terminal (set its title, rewrite lines, hide output).
    """
    return "\n".join("".join(map(_shown, line)) for line in str(text).split("\n"))


def _shown(char: str) -> str:
    if unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS:
        return char.encode("unicode_escape").decode("ascii")
    return char


def say(text: object = "", err: bool = False) -> None:
    """``click.echo`` for text that may hold dataset-controlled strings (see ``show_text``)."""
    click.echo(show_text(text), err=err)


class CommandError(click.ClickException):
    """What every ``mds`` command reports on a failure: one line, ``error: ...``, and exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the error as one ``error: ...`` line on stderr, without click's usage hint."""
        say(f"error: {self.format_message()}", err=True)


class CommandGroup(click.Group):
    """A group whose commands report an ``MDSError`` as a ``CommandError`` instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, turning an ``MDSError`` into a ``CommandError``."""
        try:
            return super().invoke(ctx)
        except MDSError as err:
            raise CommandError(str(err)) from err


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` as its error (exit status 2)."""
    raise CommandError(message)


def verdict(problems: list[str]) -> str:
    """Print each problem (``FAIL ...``) on stdout, and return the summary's head to print after them.

    The head is ``OK``, ``FAILED (1 problem)``, ``FAILED (2 problems)``... One stream, so the causes come first wherever the output
    goes.
    """
    for problem in problems:
        say(f"FAIL {problem}")
    count = len(problems)
    return "OK" if not count else f"FAILED ({count} problem{'' if count == 1 else 's'})"


def emit(obj: Any, as_json: bool, lines: list[str]) -> None:
    """Print ``obj`` as indented JSON when ``as_json``, else ``lines``."""
    if as_json:
        click.echo(json.dumps(obj, indent=2, default=str))  # JSON escapes control characters itself
    else:
        say("\n".join(lines))


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
        store.download(INDEX_BASENAME, os.path.join(local, INDEX_BASENAME), max_bytes=MAX_INDEX_BYTES)
        if shards:
            with open(os.path.join(local, INDEX_BASENAME), "rb") as file:
                index = parse_index(file.read(), path)
            for shard in index:
                info = shard.zip_data or shard.raw_data  # a compressed shard exists remotely only as its zip
                # No more than the index declares: a larger object is cut off, not left to fill the disk. A
                # shorter one is copied, for `mds verify` to report with the shard it belongs to.
                store.download(info.basename, os.path.join(local, info.basename), max_bytes=info.bytes)
        yield local
