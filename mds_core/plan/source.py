"""Index entries and a store's speed, for the planner: ``load_streams`` and ``probe``."""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mds_core.errors import ConfigurationError, InvalidIndexError
from mds_core.format.encodings import UNSAFE_ENCODINGS
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_index, parse_index
from mds_core.plan.figures import Environment
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.streaming.local import LocalDataset

_PROBE_THREADS = 4  # as many parallel downloads as one worker's ShardCache runs
_STARTUP_TRIES = 3


def load_streams(sources: Sequence[str], storage_options: dict[str, Any] | None = None) -> list[list[ShardInfo]]:
    """The index entries of each dataset (a directory or URL holding ``index.json``); shards are listed, not read."""
    if not sources:
        raise ConfigurationError("plan needs at least one dataset path or URL")
    streams = []
    for source in sources:
        store = open_store(source, storage_options=storage_options)
        shards = parse_index(store.read_bytes(INDEX_BASENAME), store.url_of(INDEX_BASENAME))
        check_files_hold_claims(shards, store)
        streams.append(shards)
    return streams


def check_files_hold_claims(shards: list[ShardInfo], store: RemoteStore) -> None:
    """Refuse an index whose shard files are not on the store at the sizes it declares (one listing).

    The plan's memory grows with the samples the index claims; a few hundred bytes of index can claim
    10**9 samples. What the files hold bounds that: each shard's header alone takes 4 bytes per sample.
    """
    found = store.sizes()
    for shard_id, shard in enumerate(shards):
        if not any(found.get(info.basename) == info.bytes for info in shard.files):
            stored = shard.zip_data or shard.raw_data
            held = found.get(stored.basename)
            raise InvalidIndexError(
                f"{store.url_of(INDEX_BASENAME)}: shard {shard_id} claims {shard.samples:,} samples in "
                f"{stored.bytes:,} bytes of {stored.basename}, but the store holds "
                f"{'no such file' if held is None else f'{held:,} bytes'}; the index does not match its files "
                "(`mds verify` checks them)"
            )


def probe(source: str, max_bytes: int = 64 << 20, storage_options: dict[str, Any] | None = None) -> Environment:
    """Measure, against the store: startup, request latency, download bandwidth and per-sample decode time.

    Startup is a new client's first read of ``index.json`` (after another client has loaded the
    storage libraries), the least of three such clients; latency the median of two more reads.
    Bandwidth is the rate of downloading the first shards (up to ``max_bytes``, at least one) four
    at a time, less one latency. Decode time is one pass over the
    downloaded shards' samples, as a DataLoader worker reads them (``pkl`` values as bytes: never unpickled).
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


def _pickles_as_bytes(shard: ShardInfo) -> ShardInfo:
    """The shard with its ``pkl`` columns read as ``bytes``: both store a length-prefixed byte string."""
    encodings = ["bytes" if encoding in UNSAFE_ENCODINGS else encoding for encoding in shard.column_encodings]
    return dataclasses.replace(shard, column_encodings=encodings)


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
    """Seconds per sample to read every sample of the downloaded shards.

    ``pkl`` values are read as the bytes they are stored as, never unpickled: the dataset being
    planned may come from anyone, and unpickling runs whatever code its bytes name.
    """
    with open(os.path.join(local, INDEX_BASENAME), "w") as file:
        file.write(dumps_index([_pickles_as_bytes(shard) for shard in shards]))
    with LocalDataset(local) as dataset:
        began = time.perf_counter()
        count = sum(1 for _ in dataset)
        return (time.perf_counter() - began) / max(count, 1)
