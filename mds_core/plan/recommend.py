"""Recommendations for ``cache_limit``, ``predownload`` and ``shuffle_block_size``, each with its trade-off."""

from __future__ import annotations

from collections.abc import Callable

from mds_core.plan.figures import Recommendation, TrainingPlan
from mds_core.sizes import format_bytes

PREDOWNLOAD_BATCHES = (1, 2, 4, 8, 16, 32)  # predownload candidates, in batches
_GOOD_ENOUGH = 1.02  # within 2% of the fastest modelled epoch


def recommend(plan: TrainingPlan, epoch_seconds_with: Callable[[int], float | None]) -> list[Recommendation]:
    return [_cache_limit(plan), _predownload(plan, epoch_seconds_with), _block_size(plan)]


def _cache_limit(plan: TrainingPlan) -> Recommendation:
    loader_minimum = plan.settings["loader_minimum_cache_limit"]
    need = -(-max(plan.smallest_cache_limit, loader_minimum) // 1024) * 1024  # whole KiB, rounded up
    peak = max(node.peak_cache_bytes for epoch in plan.epochs for node in epoch.nodes)
    given = plan.settings["cache_limit"]
    reason = (
        f"the least per node with which no shard is downloaded twice in an epoch (least-recently-used "
        f"eviction, with every prefetch complete as soon as it is asked for: the worst case), and at least the {format_bytes(loader_minimum)} StreamingDataset "
        f"requires for this order; the shards being read at once take {format_bytes(plan.working_set_bytes)}. "
    )
    if given is None:
        reason += f"Without a limit each node keeps everything it reads: {format_bytes(peak)} after {len(plan.epochs)} epoch(s)."
    else:
        refetched = plan.refetched_shards
        reason += (
            f"With cache_limit={format_bytes(given)}, {refetched:,} shard download(s) repeat over the planned epochs."
            if refetched
            else f"cache_limit={format_bytes(given)} is enough."
        )
        if given < loader_minimum:
            reason += f" StreamingDataset refuses cache_limit={format_bytes(given)} for this order at construction."
    reason += " A lower limit saves disk and pays for it in repeated downloads."
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


def _block_size(plan: TrainingPlan) -> Recommendation:
    block = plan.settings["shuffle_block_size"]
    limit = plan.settings["cache_limit"]
    if not plan.settings["shuffle"]:
        return Recommendation("shuffle_block_size", None, "not used: shuffle is off")
    if limit and plan.smallest_cache_limit > limit:
        smaller = max(1, int(block * limit / plan.smallest_cache_limit))
        return Recommendation(
            "shuffle_block_size",
            smaller,
            (
                f"cache_limit={format_bytes(limit)} is below the {format_bytes(plan.smallest_cache_limit)} this block needs; the cache "
                "need grows about in proportion to the block, so this block fits. Smaller blocks mix samples from "
                "fewer shards at a time (a weaker shuffle); raising cache_limit keeps the shuffle."
            ),
        )
    return Recommendation(
        "shuffle_block_size",
        block,
        (
            f"keep {block:,}: each node then reads {format_bytes(plan.working_set_bytes)} of shards at once. Doubling the block "
            "mixes samples from about twice as many shards and about doubles that cache need; halving it does the "
            "reverse."
        ),
    )
