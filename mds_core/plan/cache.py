"""A node's shard cache over an epoch: exact downloads without a limit, and an LRU model with one.

Without ``cache_limit`` nothing is evicted, so what a node downloads is exactly the set of shards
it reads that are not cached yet, and its footprint only grows. With a limit, eviction depends on
when each shard was last used; the model replays the node's reads step by step through a
least-recently-used cache, as ``ShardCache`` evicts, with each shard requested ahead of its first use
as the loader prefetches, and counts the shards fetched again. The real cache also depends on
timing (parallel downloads, when deleted files are noticed), so under a limit that is too small it
fetches more often than the replay says; at or above the replay's smallest limit both fetch each
shard once (``docs/planning.md``).
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
    fetch_steps: list[int] = field(default_factory=list)  # the step that needs each fetch
    fetch_shards: list[int] = field(default_factory=list)


class LRUCache:
    """Shard ids -> cached bytes, evicting the least recently used to stay within ``limit``."""

    def __init__(self, cache_bytes: NDArray[np.int64], download_bytes: NDArray[np.int64], limit: int | None) -> None:
        self.cache_bytes, self.download_bytes = cache_bytes.tolist(), download_bytes.tolist()
        self.limit = limit
        self.entries: OrderedDict[int, None] = OrderedDict()
        self.used = 0
        self.total_fetched = 0  # bytes over every epoch replayed so far

    def replay(
        self, reads: NodeReads, lead_steps: int = 0, record: bool = True, stop_at_refetch: bool = False
    ) -> CacheReplay:
        """Replay one epoch's reads; ``stop_at_refetch`` returns at the first shard fetched twice.

        Each shard is requested ``lead_steps`` before its first use on the node, as the loader's
        prefetch does, and then counts as the most recently used; a shard evicted before a later
        use is fetched again then.
        """
        out, fetched_this_epoch = CacheReplay(peak_bytes=self.used), set[int]()
        bounds = np.searchsorted(reads.steps, np.arange(reads.num_steps + 1)).tolist()
        shards = reads.shards.tolist()
        requests = _requests_by_step(reads, len(self.cache_bytes), lead_steps)
        for step in range(reads.num_steps):
            for shard, needed_at in requests.get(step, ()):
                if (
                    shard not in self.entries
                    and self._fetch(shard, needed_at, out, fetched_this_epoch, record)
                    and stop_at_refetch
                ):
                    return out
            for shard in shards[bounds[step] : bounds[step + 1]]:
                if shard in self.entries:
                    self.entries.move_to_end(shard)
                elif self._fetch(shard, step, out, fetched_this_epoch, record) and stop_at_refetch:
                    return out
            if record:
                out.footprint.append(self.used)
                out.downloaded.append(self.total_fetched)
        return out

    def _fetch(self, shard: int, needed_at: int, out: CacheReplay, fetched_this_epoch: set[int], record: bool) -> bool:
        """Fetch ``shard`` (for step ``needed_at``) as the most recently used, evicting the least recently used.

        Returns whether it is a refetch.
        """
        again = shard in fetched_this_epoch
        out.refetched_shards += again
        fetched_this_epoch.add(shard)
        out.fetched_shards += 1
        out.fetched_bytes += self.download_bytes[shard]
        self.total_fetched += self.download_bytes[shard]
        self.used += self.cache_bytes[shard]
        while self.limit is not None and self.used > self.limit and self.entries:
            victim, _ = self.entries.popitem(last=False)
            self.used -= self.cache_bytes[victim]
        self.entries[shard] = None
        out.peak_bytes = max(out.peak_bytes, self.used)
        if record:
            out.fetch_steps.append(needed_at)
            out.fetch_shards.append(shard)
        return again


def _requests_by_step(reads: NodeReads, num_shards: int, lead_steps: int) -> dict[int, list[tuple[int, int]]]:
    """(shard, first use) the node asks for at each step: ``lead_steps`` before each first use, in that order."""
    first = reads.first_use(num_shards)
    used = np.flatnonzero(first >= 0)
    used = used[np.argsort(first[used], kind="stable")]
    at = np.maximum(first[used] - lead_steps, 0)
    requests: dict[int, list[tuple[int, int]]] = {}
    for step, shard, needed_at in zip(at.tolist(), used.tolist(), first[used].tolist()):
        requests.setdefault(step, []).append((shard, needed_at))
    return requests


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


def smallest_limit_without_refetch(
    reads: NodeReads, cache_bytes: NDArray[np.int64], download_bytes: NDArray[np.int64], lead_steps: int = 0
) -> int:
    """The smallest ``cache_limit`` (to the smallest shard's size) under which the replay fetches no shard twice."""

    def refetches(limit: int) -> bool:
        cache = LRUCache(cache_bytes, download_bytes, limit)
        return cache.replay(reads, lead_steps, record=False, stop_at_refetch=True).refetched_shards > 0

    used = reads.used()
    if not len(used):
        return 0
    low = int(live_bytes(reads, cache_bytes).max())  # no policy does with less
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
    return min(high, int(cache_bytes[used].sum()))  # a cache that holds every shard it reads never evicts
