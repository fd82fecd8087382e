"""Index entries and a store's speed, for the planner: ``load_streams`` and ``probe``."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mds_core.errors import ConfigurationError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_index, parse_index
from mds_core.plan.figures import Environment
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.streaming.local import LocalDataset

_PROBE_THREADS = 4  # as many parallel downloads as one worker's ShardCache runs
_STARTUP_TRIES = 3


def load_streams(sources: Sequence[str], storage_options: dict[str, Any] | None = None) -> list[list[ShardInfo]]:
    """The index entries of each dataset (a directory or URL holding ``index.json``); shards are not read."""
    if not sources:
        raise ConfigurationError("plan needs at least one dataset path or URL")
    streams = []
    for source in sources:
        store = open_store(source, storage_options=storage_options)
        streams.append(parse_index(store.read_bytes(INDEX_BASENAME), store.url_of(INDEX_BASENAME)))
    return streams


def probe(source: str, max_bytes: int = 64 << 20, storage_options: dict[str, Any] | None = None) -> Environment:
    """Measure, against the store: startup, request latency, download bandwidth and per-sample decode time.

    Startup is a new client's first read of ``index.json`` (after another client has loaded the
    storage libraries), the least of three such clients; latency the median of two more reads.
    Bandwidth is the rate of downloading the first shards (up to ``max_bytes``, at least one) four
    at a time, less one latency. Decode time is one pass over the
    downloaded shards' samples, as a DataLoader worker reads them.
    """
    # A first client loads the storage libraries and reads the index; what a loader pays per new
    # client is then the second client's first request.
    warm = open_store(source, storage_options=storage_options)
    index = parse_index(warm.read_bytes(INDEX_BASENAME), warm.url_of(INDEX_BASENAME))
    # A client's set-up time varies with other load on the machine by a factor of three or more
    # (0.15-0.5 s measured on loopback); the least of a few is what the set-up itself costs.
    startup, store = min((_first_read(source, storage_options) for _ in range(_STARTUP_TRIES)), key=lambda r: r[0])
    latencies = [_timed_read(store) for _ in range(2)]
    chosen: list[ShardInfo] = []
    total = 0
    for shard in index:
        if chosen and total + (shard.zip_data or shard.raw_data).bytes > max_bytes:
            break
        chosen.append(shard)
        total += (shard.zip_data or shard.raw_data).bytes
    with tempfile.TemporaryDirectory(prefix="mds-probe-") as local:
        began = time.perf_counter()
        with ThreadPoolExecutor(_PROBE_THREADS) as pool:
            files = [shard.zip_data or shard.raw_data for shard in chosen]
            list(
                pool.map(
                    lambda info: store.download(
                        info.basename, os.path.join(local, info.basename), expected_bytes=info.bytes
                    ),
                    files,
                )
            )
        seconds = time.perf_counter() - began
        decode = _decode_seconds(local, chosen)
    latency = statistics.median(latencies)
    # The parallel downloads overlap their requests' latency, except the first one's.
    transfer = seconds - latency if seconds > 2 * latency else seconds
    return Environment(
        bandwidth=total / transfer if transfer > 0 else None,
        latency=latency,
        decode_seconds=decode,
        startup_seconds=startup,
    )


def _first_read(source: str, storage_options: dict[str, Any] | None) -> tuple[float, RemoteStore]:
    """A new client and the seconds of its first read of the index, which sets the client up."""
    began = time.perf_counter()
    store = open_store(source, storage_options=storage_options)
    return time.perf_counter() - began + _timed_read(store), store


def _timed_read(store: RemoteStore) -> float:
    began = time.perf_counter()
    store.read_bytes(INDEX_BASENAME)
    return time.perf_counter() - began


def _decode_seconds(local: str, shards: list[ShardInfo]) -> float:
    """Seconds per sample to read every sample of the downloaded shards."""
    with open(os.path.join(local, INDEX_BASENAME), "w") as file:
        file.write(dumps_index(shards))
    with LocalDataset(local, allow_unsafe_types=True) as dataset:
        began = time.perf_counter()
        count = sum(1 for _ in dataset)
        return (time.perf_counter() - began) / max(count, 1)
