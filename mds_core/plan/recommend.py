"""Recommendations for ``cache_limit``, ``predownload`` and ``shuffle_block_size``, each with its trade-off."""

from __future__ import annotations

from collections.abc import Callable

from mds_core.plan.figures import Recommendation, TrainingPlan
from mds_core.sizes import format_bytes

PREDOWNLOAD_BATCHES = (1, 2, 4, 8, 16, 32)  # predownload candidates, in batches
_GOOD_ENOUGH = 1.02  # within 2% of the fastest modelled epoch


def recommend(
    plan: TrainingPlan, epoch_seconds_with: Callable[[int], float | None], loader_minimum_with: Callable[[int], int]
) -> list[Recommendation]:
    """``loader_minimum_with(block)``: the least ``cache_limit`` ``StreamingDataset`` accepts with that shuffle block."""
    return [_cache_limit(plan), _predownload(plan, epoch_seconds_with), _block_size(plan, loader_minimum_with)]


_NO_REFETCH = (
    "no shard is downloaded twice in an epoch (least-recently-used eviction, with every prefetch complete as "
    "soon as it is asked for: the worst case)"
)


def _cache_limit(plan: TrainingPlan) -> Recommendation:
    loader_minimum = plan.settings["loader_minimum_cache_limit"]
    no_refetch = plan.smallest_cache_limit
    need = -(-max(no_refetch, loader_minimum) // 1024) * 1024  # whole KiB, rounded up
    peak = max(node.peak_cache_bytes for epoch in plan.epochs for node in epoch.nodes)
    given = plan.settings["cache_limit"]
    minimum = (
        f"StreamingDataset's minimum for this order is {format_bytes(loader_minimum)} per node (the shards every "
        "reader of the node works on at once, and the index)"
    )
    if no_refetch >= loader_minimum:
        reason = f"the least per node with which {_NO_REFETCH}; {minimum}."
    else:
        reason = f"{minimum}; from {format_bytes(no_refetch)} on, {_NO_REFETCH}."
    reason += f" The shards being read at once take {format_bytes(plan.working_set_bytes)}."
    refetched = plan.refetched_shards
    if given is None:
        reason += f" Without a limit each node keeps everything it reads: {format_bytes(peak)} after {len(plan.epochs)} epoch(s)."
    elif given < loader_minimum:  # never "enough": the run does not start
        reason += (
            f" cache_limit={format_bytes(given)} is too small: StreamingDataset refuses a limit under its minimum "
            "at construction. The figures above replay a cache that small anyway"
            + (f": {refetched:,} shard download(s) repeat over the planned epochs." if refetched else ".")
        )
    elif refetched:
        reason += (
            f" With cache_limit={format_bytes(given)}, {refetched:,} shard download(s) repeat over the planned epochs."
        )
    else:
        reason += f" cache_limit={format_bytes(given)} is enough: no shard is downloaded twice."
    if no_refetch > loader_minimum:
        reason += " A lower limit, down to that minimum, saves disk and pays for it in repeated downloads."
    else:
        reason += " StreamingDataset accepts no lower limit for this order."
    return Recommendation("cache_limit", need, reason)


def _predownload(plan: TrainingPlan, epoch_seconds_with: Callable[[int], float | None]) -> Recommendation:
    batch = plan.settings["batch_size"]
    current = plan.settings["predownload"]
    timed = {batches * batch: epoch_seconds_with(batches * batch) for batches in PREDOWNLOAD_BATCHES}
    known = {p: seconds for p, seconds in timed.items() if seconds is not None}
    if len(known) < len(timed):
        return Recommendation(
            "predownload",
            current,
            "keep the default (8 x batch_size): without --bandwidth or "
            "--consume-time there is nothing to model; pass them, or --probe",
        )
    fastest = min(known.values())
    value = min(p for p, seconds in known.items() if seconds <= fastest * _GOOD_ENOUGH)
    table = ", ".join(f"{p}: {seconds:,.1f} s" for p, seconds in known.items())
    return Recommendation(
        "predownload",
        value,
        f"the smallest that keeps the modelled first epoch within 2% of the "
        f"fastest ({table}). More fetches ahead hides slow downloads but holds more shards in the "
        "cache and in flight.",
    )


def _block_size(plan: TrainingPlan, loader_minimum_with: Callable[[int], int]) -> Recommendation:
    block = plan.settings["shuffle_block_size"]
    limit = plan.settings["cache_limit"]
    if not plan.settings["shuffle"]:
        return Recommendation("shuffle_block_size", None, "not used: shuffle is off")
    if limit is None or max(plan.smallest_cache_limit, plan.settings["loader_minimum_cache_limit"]) <= limit:
        return Recommendation(
            "shuffle_block_size",
            block,
            (
                f"keep {block:,}: each node then reads {format_bytes(plan.working_set_bytes)} of shards at once. "
                "Doubling the block mixes samples from about twice as many shards and about doubles that cache "
                "need; halving it does the reverse."
            ),
        )
    if loader_minimum_with(1) > limit:
        return Recommendation(
            "shuffle_block_size",
            None,
            (
                f"no block makes cache_limit={format_bytes(limit)} enough: even the smallest leaves each of the "
                "node's readers two shards at once, more than that holds. Raise cache_limit."
            ),
        )
    # The cache need grows about in proportion to the block; the loader's minimum grows with it too.
    fits = block if plan.smallest_cache_limit <= limit else max(1, block * limit // plan.smallest_cache_limit)
    low, high = 1, fits  # the loader accepts ``low``; find the largest block up to ``fits`` it accepts
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if loader_minimum_with(middle) <= limit else (low, middle - 1)
    return Recommendation(
        "shuffle_block_size",
        low,
        (
            f"about the largest block that cache_limit={format_bytes(limit)} holds without repeated downloads, "
            "and one StreamingDataset accepts with it: the cache need grows about in proportion to the block. "
            "Smaller blocks mix samples from fewer shards at a time (a weaker shuffle); raising cache_limit keeps "
            "the shuffle."
        ),
    )
