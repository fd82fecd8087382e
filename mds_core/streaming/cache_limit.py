"""Is a ``cache_limit`` big enough for the chosen order? Checked at construction, not found by thrashing.

The reference only asks for 4x the largest shard, so a shuffle that interleaves many shards (py1e
with a large block) evicts shards it still needs and downloads them again and again, or deadlocks.
Here the limit must hold every shard one reader works on at once, for every reader on the node.
"""

from __future__ import annotations

import math
import os
from typing import Any

from mds_core.errors import ConfigurationError, SizeError
from mds_core.format.index import INDEX_BASENAME
from mds_core.order.spec import OrderSpec
from mds_core.sizes import bytes_to_int
from mds_core.streaming.local import LocalDataset


def shards_in_use(shuffle: bool, algo: str, block_size: int, shard_samples: list[int]) -> int:
    """About how many shards one reader interleaves under this order."""
    count = len(shard_samples)
    if not shuffle or algo in ("py1s", "py2s"):
        return min(count, 2)  # a shard at a time, plus the next one arriving
    if algo == "naive":
        return count  # samples from anywhere, in any order
    smallest = max(1, min((s for s in shard_samples if s > 0), default=1))
    return min(count, math.ceil(block_size / smallest) + 1)  # py1br / py1e mix whole blocks


def readers_at_once(spec: OrderSpec, parallel_nodes: int, ranks_per_node: int) -> int:
    """How many places of the data a node reads at once: one per rank, and one per canonical node.

    A node's sample sequence interleaves its canonical nodes sample by sample, and each canonical
    node reads its own span of shards, so with 64 canonical nodes per node (py1s/py2s's default)
    the node works on 64 shards at once however few ranks it has.
    """
    canonical_per_node = math.ceil(spec.canonical_nodes(parallel_nodes) / parallel_nodes)
    return max(ranks_per_node, canonical_per_node)


def cache_limit_needed(shard_bytes: list[int], index_bytes: int, in_use: int, readers: int) -> tuple[int, int]:
    """(shards held at once, bytes).

    What ``readers`` each working on ``in_use`` shards need, counting every shard as the largest, plus one arriving,
    plus the index.
    """
    shards = min(len(shard_bytes), in_use * readers + 1)
    return shards, index_bytes + max(shard_bytes, default=0) * shards


def check_cache_limit(
    limit: int, shard_bytes: list[int], index_bytes: int, in_use: int, readers: int, order: str
) -> None:
    """Raise ``ConfigurationError`` when ``limit`` cannot hold what ``readers`` need at once.

    The message starts with the reference's words for its two cases (code written against it matches on
    them), without their numbers, and states one minimum, ours: the reference's (the index alone, four
    times the largest shard) are not what this order needs.
    """
    largest = max(shard_bytes, default=0)
    shards, need = cache_limit_needed(shard_bytes, index_bytes, in_use, readers)
    if limit < need:
        head = (
            f"Minimum cache usage is larger than the cache limit ({limit} bytes)"
            if limit <= index_bytes
            else f"Cache limit ({limit} bytes) is too low"
        )
        raise ConfigurationError(
            f"{head}. Increase the `cache_limit` to at least {need:,} bytes "
            f"for this order ({order}): this node reads {readers} place(s) at once (the larger of its ranks "
            f"and its canonical nodes), each working on about {in_use} shard(s), so the cache holds {shards} "
            f"shard(s) of up to {largest:,} bytes (the largest) and {index_bytes:,} bytes of index. Or lower "
            "shuffle_block_size or num_canonical_nodes, or use shuffle_algo='py1s'"
        )


def parse_cache_limit(cache_limit: int | str | None) -> int | None:
    """``cache_limit`` in bytes (``"50gb"`` style strings too); falsy means no limit."""
    if not cache_limit:
        return None
    try:
        return bytes_to_int(cache_limit)
    except SizeError as err:
        raise ConfigurationError(f"cache_limit: {err}") from None


def apply_cache_limit(
    limit: int,
    streams: list[Any],
    readers: list[LocalDataset],
    spec: OrderSpec,
    parallel_nodes: int,
    ranks_per_node: int,
) -> None:
    """Check ``limit`` against the order, then share it among the remote streams by size."""
    remote = [(stream, reader) for stream, reader in zip(streams, readers) if stream.remote]
    if not remote:
        return  # a shard whose only copy is local is never evicted
    caches = [reader.shard_cache for _, reader in remote]
    shard_bytes = [cache.shard_bytes(i) for cache in caches for i in range(len(cache.shards))]
    block = spec.block_size(parallel_nodes)
    in_use = shards_in_use(
        spec.shuffle, spec.shuffle_algo, block, [shard.samples for _, reader in remote for shard in reader.shards]
    )
    index_bytes = sum(os.path.getsize(os.path.join(stream.root, INDEX_BASENAME)) for stream, _ in remote)
    canonical = spec.canonical_nodes(parallel_nodes)
    order = (
        f"shuffle={spec.shuffle}, shuffle_algo={spec.shuffle_algo!r}, block {block:,}, "
        f"{canonical} canonical node(s) over {parallel_nodes} node(s)"
    )
    check_cache_limit(
        limit, shard_bytes, index_bytes, in_use, readers_at_once(spec, parallel_nodes, ranks_per_node), order
    )
    total = sum(shard_bytes)
    for cache, (_, reader) in zip(caches, remote):
        share = sum(cache.shard_bytes(i) for i in range(len(cache.shards)))
        cache.cache_limit = limit * share // max(1, total)  # and so its download threads (download_threads)
        reader.max_open = in_use + 1
