"""What a state dict says a loader reads: each stream's root, shard-set version and that version's lineage.

A checkpoint then names its data: the shard set and version it trained on and, for a version a Delta
table fed, the table and table versions its rows came from (the manifest's ``lineage``). Resuming on
another version is refused by ``mds_core.streaming.resume.check_versions``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from mds_core.storage.urls import redact
from mds_core.streaming.stream import Stream


def stream_root(stream: Stream) -> str:
    """Where a stream's data lives as a state dict names it: its remote without credentials, else its folder.

    Args:
        stream: one of a dataset's streams.
    """
    if stream.remote is None:
        return os.path.normpath(stream.root)
    if stream.split:
        return redact(f"{stream.remote.rstrip('/')}/{stream.split}")
    return redact(stream.remote)


class DataRecord:
    """Each stream's ``root``, ``version`` (None: not a pinned version) and ``lineage`` (None unless pinned).

    The manifests are read at the first call only: a committed version never changes, and a loader that
    checkpoints every few minutes should not read them each time. Each call returns its own copy.

    Args:
        streams: the dataset's streams, in order.
    """

    def __init__(self, streams: Sequence[Stream]) -> None:
        self._streams = list(streams)
        self._json: str | None = None

    def __call__(self) -> list[dict[str, Any]]:
        """The record, as a fresh list a caller may change."""
        if self._json is None:
            self._json = json.dumps([_entry(stream) for stream in self._streams])
        return list(json.loads(self._json))


def _entry(stream: Stream) -> dict[str, Any]:
    lineage: dict[str, Any] | None = None
    if stream.version is not None and stream.remote is not None:
        lineage = _named(stream.shard_set().version(stream.version).lineage)
    return {"root": stream_root(stream), "version": stream.version, "lineage": lineage}


def _named(lineage: dict[str, Any]) -> dict[str, Any]:
    """The lineage without the source's table schema: the table, its id and versions name the data."""
    source = lineage.get("source")
    if not isinstance(source, dict) or "schema" not in source:
        return lineage
    return lineage | {"source": {key: value for key, value in source.items() if key != "schema"}}
