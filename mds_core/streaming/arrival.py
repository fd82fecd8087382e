"""Decoding a block of samples a shard at a time.

In one go (local shards), or handed out as their shards arrive (streams that download them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

# Samples decoded in one call: each call costs tens of µs whatever its size, so small samples go many at
# a time (a 100-byte sample decodes in under 1 µs); large ones stay near 256 so their values stay small.
DECODE_BYTES = 1 << 20
MIN_DECODE_BLOCK, MAX_DECODE_BLOCK = 256, 4096


class ShardOwners(Sequence[tuple[Any, int]]):
    """``owners[shard]``: the (reader, shard of that reader) holding each global shard id, kept as arrays.

    A list of tuples read by a forked DataLoader worker has each tuple's count written, which copies
    the page it lies on from the rank (see ``LocalDataset``'s arrays for the index entries).
    """

    def __init__(self, readers: Sequence[Any]) -> None:
        counts = [len(reader.shards) for reader in readers]
        self._readers = list(readers)
        self._reader_of = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        self._first = np.cumsum([0, *counts[:-1]], dtype=np.int64)  # each reader's first global shard id

    def __len__(self) -> int:
        return len(self._reader_of)

    def __getitem__(self, shard: Any) -> Any:  # a global shard id (int or numpy integer)
        reader = int(self._reader_of[shard])
        return self._readers[reader], int(shard) - int(self._first[reader])


def decode_block_size(total_bytes: int, samples: int) -> int:
    """How many samples to decode together when they average ``total_bytes / samples`` bytes."""
    mean = max(1, total_bytes // max(1, samples))
    return min(MAX_DECODE_BLOCK, max(MIN_DECODE_BLOCK, DECODE_BYTES // mean))


def block_bounds(count: int, per_call: int) -> list[tuple[int, int]]:
    """``[begin, end)`` of each block of ``count`` samples.

    The first of at most ``MIN_DECODE_BLOCK``, the others of ``per_call``, so the first samples of an iteration (a first
    batch, a resumed loader's next one) wait for 256 samples to be decoded, not 4,096.
    """
    first = min(count, MIN_DECODE_BLOCK)
    return [(0, first)] * bool(first) + [(b, min(count, b + per_call)) for b in range(first, count, per_call)]


def decode_in_order(
    owners: Sequence[tuple[Any, int]], shard_ids: np.ndarray, local_ids: np.ndarray
) -> list[dict[str, Any]]:
    """Samples in the given order, decoded a shard at a time (each shard's samples in one call)."""
    out: list[Any] = [None] * len(shard_ids)
    for positions in by_shard(shard_ids):
        reader, shard_of_reader = owners[int(shard_ids[positions[0]])]
        samples = reader.shard_reader(shard_of_reader).take(local_ids[positions])
        for position, sample in zip(positions.tolist(), samples, strict=True):
            out[position] = sample
    return out


def decode_timed(
    owners: Sequence[tuple[Any, int]], metrics: Any, shard_ids: np.ndarray, local_ids: np.ndarray
) -> list[dict[str, Any]]:
    """``decode_in_order``, timed for the worker's ``metrics`` (or None) per block.

    Not per sample: two clock reads cost about as much as decoding a small sample.
    """
    mark = metrics.mark() if metrics is not None else None
    block = decode_in_order(owners, shard_ids, local_ids)
    if metrics is not None and mark is not None:
        metrics.decoded(len(block), mark)
    return block


def by_shard(shard_ids: np.ndarray) -> list[np.ndarray]:
    """The positions of ``shard_ids`` grouped by shard, each group in order, shards in ascending order."""
    order = np.argsort(shard_ids, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(shard_ids[order])) + 1)


def decode_as_ready(
    owners: Sequence[tuple[Any, int]], metrics: Any, shard_ids: np.ndarray, local_ids: np.ndarray, ranged: Any = None
) -> Iterator[dict[str, Any]]:
    """A block's samples in order, each handed out as soon as it and those before it are decoded.

    A shuffled block of 256 samples spans most shards, which arrive in any order. Its shards are
    decoded as they arrive (every one ready, then the one the next sample waits for), so the first
    sample waits for its own shard only, and decoding overlaps the downloads still running.
    ``owners[shard]`` is the (reader, shard of that reader) holding a global shard id; ``metrics`` the
    worker's decode timer, or None. With ``ranged`` (a ``ranged.RangedBlock``), the block's samples read by
    byte ranges serve their shards as soon as they are here, if before the whole files.
    """
    pending = {int(shard_ids[positions[0]]): positions for positions in by_shard(shard_ids)}
    out: list[Any] = [None] * len(shard_ids)
    decoded = np.zeros(len(shard_ids), bool)
    handed = 0
    while handed < len(out):
        waited_for = int(shard_ids[handed])
        if ranged is not None:
            ranged.wait(waited_for)
        ready = [
            shard
            for shard in pending
            if shard != waited_for and (shard_ready(*owners[shard]) or (ranged is not None and ranged.ready(shard)))
        ]
        mark = metrics.mark() if metrics is not None else None
        count = 0
        for shard in [*ready, waited_for] if waited_for in pending else ready:
            positions = pending.pop(shard)
            reader, shard_of_reader = owners[shard]
            samples = ranged.take(shard) if ranged is not None else None
            if samples is None:
                samples = reader.shard_reader(shard_of_reader).take(local_ids[positions])
            for position, sample in zip(positions.tolist(), samples, strict=True):
                out[position] = sample
            decoded[positions] = True
            count += len(positions)
        if metrics is not None and mark is not None and count:
            metrics.decoded(count, mark)
        # Every decoded sample up to the first one still missing goes out; the block lets go of them.
        missing = np.flatnonzero(~decoded[handed:])
        stop = handed + int(missing[0]) if len(missing) else len(out)
        ready_now, out[handed:stop] = out[handed:stop], [None] * (stop - handed)
        handed = stop
        yield from ready_now


def shard_ready(reader: Any, shard_id: int) -> bool:
    """Whether reading the shard now would not wait for a download."""
    cache = reader.shard_cache
    return bool(reader.is_open(shard_id) or cache is None or cache.is_ready(shard_id))
