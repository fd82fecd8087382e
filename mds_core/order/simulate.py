"""Simulate an epoch on several worlds and resume points, and compare their global batches.

Behind ``mds check-order``: with a fixed ``num_canonical_nodes`` and global batch size, global batch
``t`` should hold the same samples whatever the nodes, ranks and workers, and a run resumed at
sample ``k*G`` should continue with the uninterrupted run's batch ``k``. The final batch is left out:
its padding repeats depend on the topology by design.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import MDSError
from mds_core.order.spec import OrderSpec
from mds_core.order.traversal import to_global_batches
from mds_core.order.work import generate_work
from mds_core.order.world import World


@dataclass(frozen=True)
class Comparison:
    """How a resumed loader's batches compared with an uninterrupted run's, for one world."""

    world: World
    resume_at: int
    batches_compared: int
    first_difference: tuple[int, list[int], list[int]] | None = None  # (batch, expected, got)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run could be compared and no batch differed."""
        return self.error is None and self.first_difference is None


# An epoch's work array for (world, per-device batch size, epoch, sample_in_epoch): a scheduled run's
# (mds_core.streaming.scheduled) instead of the reference's order.
WorkOf = Callable[[World, int, int, int], NDArray[np.int64]]


def global_batches(
    spec: OrderSpec, world: World, global_batch: int, epoch: int, sample_in_epoch: int, work_of: WorkOf | None = None
) -> list[Counter[int]]:
    """The multiset of sample ids in each global batch of the epoch, for one world."""
    ranks = world.num_ranks
    if global_batch % ranks:
        raise MDSError(f"global batch {global_batch} is not divisible by {ranks} ranks")
    if work_of is not None:  # whole global batches: a row of -1 is a worker's batch fewer, not a padded batch
        work = work_of(world, global_batch // ranks, epoch, sample_in_epoch)
        return [Counter(row.tolist()) for row in to_global_batches(work, global_batch) if row[0] >= 0]
    spec = dataclasses.replace(spec, batch_size=global_batch // ranks)
    work = generate_work(spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank, epoch, sample_in_epoch)
    return [Counter(row[row >= 0].tolist()) for row in to_global_batches(work, global_batch)]


def check_order(
    spec: OrderSpec,
    worlds: list[World],
    global_batch: int,
    epoch: int = 0,
    resume_fractions: tuple[float, ...] = (0.0,),
    work_of: WorkOf | None = None,
) -> list[Comparison]:
    """Compare every (world, resume point) with the first world's uninterrupted epoch."""
    baseline = global_batches(spec, worlds[0], global_batch, epoch, 0, work_of)
    results = []
    for world in worlds:
        for fraction in resume_fractions:
            skip = int(fraction * (len(baseline) - 1))
            results.append(_compare(spec, world, global_batch, epoch, skip, baseline, work_of))
    return results


def _compare(
    spec: OrderSpec,
    world: World,
    global_batch: int,
    epoch: int,
    skip: int,
    baseline: list[Counter[int]],
    work_of: WorkOf | None,
) -> Comparison:
    try:
        batches = global_batches(spec, world, global_batch, epoch, skip * global_batch, work_of)
    except MDSError as err:
        return Comparison(world, skip * global_batch, 0, error=str(err))
    expected = baseline[skip:]
    count = min(len(batches), len(expected)) - 1  # the final batch carries topology-dependent padding
    for t in range(max(count, 0)):
        if batches[t] != expected[t]:
            return Comparison(
                world, skip * global_batch, t, (skip + t, sorted(expected[t].elements()), sorted(batches[t].elements()))
            )
    return Comparison(world, skip * global_batch, max(count, 0))
