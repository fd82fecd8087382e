"""Is a ``cache_limit`` big enough for the chosen order? Checked at construction, not found by thrashing.

The reference only asks for 4x the largest shard, so a shuffle that interleaves many shards (py1e
with a large block) evicts shards it still needs and downloads them again and again, or deadlocks.
Here the limit must hold every shard one reader works on at once, for every reader on the node.
"""

from __future__ import annotations

import math

from mds_core.errors import ConfigurationError


def shards_in_use(shuffle: bool, algo: str, block_size: int, shard_samples: list[int]) -> int:
    """About how many shards one reader interleaves under this order."""
    count = len(shard_samples)
    if not shuffle or algo in ("py1s", "py2s"):
        return min(count, 2)  # a shard at a time, plus the next one arriving
    if algo == "naive":
        return count  # samples from anywhere, in any order
    smallest = max(1, min((s for s in shard_samples if s > 0), default=1))
    return min(count, math.ceil(block_size / smallest) + 1)  # py1br / py1e mix whole blocks


def check_cache_limit(limit: int, shard_bytes: list[int], index_bytes: int, in_use: int, readers: int,
                      order: str) -> None:
    """Raise ``ConfigurationError`` when ``limit`` cannot hold what ``readers`` need at once."""
    largest = max(shard_bytes, default=0)
    shards = min(len(shard_bytes), in_use * readers + 1)
    need = index_bytes + largest * shards
    if limit < need:
        raise ConfigurationError(
            f"cache_limit={limit:,} bytes is too small for this order: {order} makes each of the {readers} "
            f"reader(s) on this node work on about {in_use} shard(s) at once, so the cache needs "
            f"{shards} x {largest:,} bytes (the largest shard) + {index_bytes:,} bytes of index = {need:,} "
            "bytes. Raise cache_limit, lower shuffle_block_size, or use shuffle_algo='py1s'"
        )
