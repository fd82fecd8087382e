"""``CacheStats``: what one process's shard caches did (downloads, hits, misses, evictions), counted per shard.

The counters live in a small float64 array. By default it is private to the object; a caller may
hand in a view of a memory-mapped file instead (``StreamingDataset`` does, one file per DataLoader
worker), so that another process can read the numbers without asking this one. Every event is per
shard, not per sample, so a lock per event costs nothing measurable; the lock matters because
downloads run in a thread pool while the consumer thread records hits and misses.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

FIELDS = (
    "shards_downloaded",  # shard files this process fetched from the store (a compressed shard's zip)
    "bytes_downloaded",  # their sizes as the index gives them (the zip's, for a compressed shard)
    "download_seconds",  # wall seconds of those downloads, retries included, summed
    "download_max_seconds",  # the slowest one
    "cache_hits",  # ShardCache.ensure found the shard already present
    "cache_misses",  # it was not: fetched by this process, or waited for while another one fetched it
    "evictions",  # shards this process deleted to stay under cache_limit
    "shard_wait_seconds",  # time ensure blocked until its shard was present (a running prefetch included)
)
COUNTS = frozenset({"shards_downloaded", "bytes_downloaded", "cache_hits", "cache_misses", "evictions"})
_SLOT = {name: slot for slot, name in enumerate(FIELDS)}


class CacheStats:
    """Thread-safe counters of ``ShardCache`` events in this process (see ``FIELDS``).

    Args:
        values: a float64 array of ``len(FIELDS)`` slots to keep the counters in (e.g. part of a
            memory-mapped file); its current contents are kept. None: a private zeroed array.
    """

    def __init__(self, values: np.ndarray | None = None) -> None:
        if values is None:
            values = np.zeros(len(FIELDS), np.float64)
        if values.shape != (len(FIELDS),) or values.dtype != np.float64:
            raise ValueError(
                f"CacheStats needs a float64 array of {len(FIELDS)} slots, got {values.dtype}{values.shape}"
            )
        self.values = values
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Counters belong to one process: a copy sent to a DataLoader worker starts from zero.
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.values = np.zeros(len(FIELDS), np.float64)
        self._lock = threading.Lock()

    def record_lookup(self, hit: bool, wait_seconds: float) -> None:
        """``ensure`` was asked for a shard: present already (``hit``) or not, after ``wait_seconds``."""
        with self._lock:
            self.values[_SLOT["cache_hits" if hit else "cache_misses"]] += 1
            self.values[_SLOT["shard_wait_seconds"]] += wait_seconds

    def record_download(self, nbytes: int, seconds: float) -> None:
        """One file came from the store: ``nbytes`` long, in ``seconds``."""
        with self._lock:
            values = self.values
            values[_SLOT["shards_downloaded"]] += 1
            values[_SLOT["bytes_downloaded"]] += nbytes
            values[_SLOT["download_seconds"]] += seconds
            values[_SLOT["download_max_seconds"]] = max(values[_SLOT["download_max_seconds"]], seconds)

    def record_eviction(self) -> None:
        """Count one shard evicted from the cache."""
        with self._lock:
            self.values[_SLOT["evictions"]] += 1

    def as_dict(self) -> dict[str, int | float]:
        """The counters by name: counts as ints, seconds as floats."""
        return counters_dict(self.values)


def counters_dict(
    values: np.ndarray, fields: tuple[str, ...] = FIELDS, counts: frozenset[str] = COUNTS
) -> dict[str, int | float]:
    """``fields`` named, from an array laid out in their order: ``counts`` as ints, the rest as floats."""
    return {name: int(value) if name in counts else float(value) for name, value in zip(fields, values.tolist())}
