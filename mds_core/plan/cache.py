"""A node's shard cache over an epoch: exact downloads without a limit, and an LRU model with one.

Without ``cache_limit`` nothing is evicted, so what a node downloads is exactly the set of shards
it reads that are not cached yet, and its footprint only grows. With a limit, eviction depends on
when each shard was last used; the model replays the node's reads step by step through a
least-recently-used cache, as ``ShardCache`` evicts, and counts the shards fetched again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from mds_core.plan.reads import NodeReads


@dataclass
class CacheReplay:
    """What one node's cache did over one epoch (or several, when replayed in sequence)."""

    fetched_shards: int = 0
    fetched_bytes: int = 0
    refetched_shards: int = 0  # fetches of a shard already fetched earlier in the same epoch
    peak_bytes: int = 0
    footprint: list[int] = field(default_factory=list)  # cached bytes after each step
    downloaded: list[int] = field(default_factory=list)  # bytes fetched since the first epoch, after each step
    fetch_steps: list[int] = field(default_factory=list)  # the step of each fetch
    fetch_shards: list[int] = field(default_factory=list)


class LRUCache:
    """Shard ids -> cached bytes, evicting the least recently used to stay within ``limit``."""

    def __init__(self, cache_bytes: NDArray[np.int64], download_bytes: NDArray[np.int64], limit: int | None) -> None:
        self.cache_bytes, self.download_bytes = cache_bytes.tolist(), download_bytes.tolist()
        self.limit = limit
        self.entries: OrderedDict[int, None] = OrderedDict()
        self.used = 0
        self.total_fetched = 0  # bytes over every epoch replayed so far

    def replay(self, reads: NodeReads, record: bool = True, stop_at_refetch: bool = False) -> CacheReplay:
        """Replay one epoch's reads; ``stop_at_refetch`` returns at the first shard fetched twice."""
        out, fetched_this_epoch = CacheReplay(peak_bytes=self.used), set()
        entries, sizes, limit = self.entries, self.cache_bytes, self.limit
        bounds = np.searchsorted(reads.steps, np.arange(reads.num_steps + 1)).tolist()
        shards = reads.shards.tolist()
        for step in range(reads.num_steps):
            for shard in shards[bounds[step]:bounds[step + 1]]:
                if shard in entries:
                    entries.move_to_end(shard)
                    continue
                if shard in fetched_this_epoch:
                    out.refetched_shards += 1
                    if stop_at_refetch:
                        return out
                fetched_this_epoch.add(shard)
                if record:
                    out.fetch_steps.append(step)
                    out.fetch_shards.append(shard)
                out.fetched_shards += 1
                out.fetched_bytes += self.download_bytes[shard]
                self.total_fetched += self.download_bytes[shard]
                self.used += sizes[shard]
                while limit is not None and self.used > limit and len(entries) > 0:
                    victim, _ = entries.popitem(last=False)
                    self.used -= sizes[victim]
                entries[shard] = None
                out.peak_bytes = max(out.peak_bytes, self.used)
            if record:
                out.footprint.append(self.used)
                out.downloaded.append(self.total_fetched)
        return out


def live_bytes(reads: NodeReads, cache_bytes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per step, the bytes of shards between their first and last use in this epoch.

    No cache can hold less without fetching a shard twice: a lower bound for any eviction policy.
    """
    num_shards = len(cache_bytes)
    first, last = reads.first_use(num_shards), reads.last_use(num_shards)
    used = first >= 0
    delta = np.zeros(reads.num_steps + 1, np.int64)
    np.add.at(delta, first[used], cache_bytes[used])
    np.add.at(delta, last[used] + 1, -cache_bytes[used])
    return np.cumsum(delta[:-1])


def smallest_limit_without_refetch(reads: NodeReads, cache_bytes: NDArray[np.int64],
                                   download_bytes: NDArray[np.int64]) -> int:
    """The smallest LRU ``cache_limit`` (to the smallest shard's size) under which no shard is fetched twice."""
    def refetches(limit: int) -> bool:
        replay = LRUCache(cache_bytes, download_bytes, limit).replay(reads, record=False, stop_at_refetch=True)
        return replay.refetched_shards > 0

    used = reads.used()
    if not len(used):
        return 0
    low = int(live_bytes(reads, cache_bytes).max())
    high = max(low, 1)
    while refetches(high):
        low, high = high, high * 2
    step = max(1, int(cache_bytes[used].min()))
    while high - low > step:  # invariant: ``high`` never refetches
        middle = (low + high) // 2
        if refetches(middle):
            low = middle
        else:
            high = middle
    return high


def prefetched_bytes(reads: NodeReads, cache_bytes: NDArray[np.int64], lead_steps: int) -> int:
    """The most bytes of shards fetched ahead of use at once: those first needed in the next ``lead_steps`` steps."""
    first = reads.first_use(len(cache_bytes))
    used = first >= 0
    by_step = np.zeros(reads.num_steps + lead_steps + 1, np.int64)
    np.add.at(by_step, first[used], cache_bytes[used])
    window = np.cumsum(by_step)
    return int((window[lead_steps:] - window[:-lead_steps]).max()) if reads.num_steps else 0
