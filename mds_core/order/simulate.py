"""Simulate an epoch on several worlds and resume points, and compare their global batches.

Behind ``mds check-order``: with a fixed ``num_canonical_nodes`` and global batch size, global batch
``t`` should hold the same samples whatever the nodes, ranks and workers, and a run resumed at
sample ``k*G`` should continue with the uninterrupted run's batch ``k``. The final batch is left out:
its padding repeats depend on the topology by design.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from mds_core.errors import MDSError
from mds_core.order.batching import generate_work, to_global_batches
from mds_core.order.spec import OrderSpec


@dataclass(frozen=True)
class SimulatedWorld:
    nodes: int
    ranks_per_node: int
    workers: int  # DataLoader workers per rank; 0 means iterating in the rank process

    def __str__(self) -> str:
        return f"{self.nodes} node(s) x {self.ranks_per_node} rank(s), {self.workers} worker(s)"


@dataclass(frozen=True)
class Comparison:
    world: SimulatedWorld
    resume_at: int
    batches_compared: int
    first_difference: tuple[int, list[int], list[int]] | None = None  # (batch, expected, got)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_difference is None


def global_batches(spec: OrderSpec, world: SimulatedWorld, global_batch: int, epoch: int,
                   sample_in_epoch: int) -> list[Counter]:
    """The multiset of sample ids in each global batch of the epoch, for one world."""
    ranks = world.nodes * world.ranks_per_node
    if global_batch % ranks:
        raise MDSError(f"global batch {global_batch} is not divisible by {ranks} ranks")
    spec = dataclasses.replace(spec, batch_size=global_batch // ranks)
    work = generate_work(spec, world.nodes, world.ranks_per_node, max(world.workers, 1), epoch, sample_in_epoch)
    return [Counter(row[row >= 0].tolist()) for row in to_global_batches(work, global_batch)]


def check_order(spec: OrderSpec, worlds: list[SimulatedWorld], global_batch: int, epoch: int = 0,
                resume_fractions: tuple[float, ...] = (0.0,)) -> list[Comparison]:
    """Compare every (world, resume point) with the first world's uninterrupted epoch."""
    baseline = global_batches(spec, worlds[0], global_batch, epoch, 0)
    results = []
    for world in worlds:
        for fraction in resume_fractions:
            skip = int(fraction * (len(baseline) - 1))
            results.append(_compare(spec, world, global_batch, epoch, skip, baseline))
    return results


def _compare(spec: OrderSpec, world: SimulatedWorld, global_batch: int, epoch: int, skip: int,
             baseline: list[Counter]) -> Comparison:
    try:
        batches = global_batches(spec, world, global_batch, epoch, skip * global_batch)
    except MDSError as err:
        return Comparison(world, skip * global_batch, 0, error=str(err))
    expected = baseline[skip:]
    count = min(len(batches), len(expected)) - 1  # the final batch carries topology-dependent padding
    for t in range(max(count, 0)):
        if batches[t] != expected[t]:
            return Comparison(world, skip * global_batch, t, (skip + t, sorted(expected[t].elements()),
                                                              sorted(batches[t].elements())))
    return Comparison(world, skip * global_batch, max(count, 0))


def parse_world(text: str) -> SimulatedWorld:
    """``"2x4"`` (nodes x ranks per node) or ``"2x4x2"`` (and workers per rank)."""
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3) or min(parts[:2]) < 1 or (len(parts) == 3 and parts[2] < 0):
        raise MDSError(f"world {text!r} must look like NODESxRANKS or NODESxRANKSxWORKERS, e.g. 2x4 or 2x4x2")
    return SimulatedWorld(parts[0], parts[1], parts[2] if len(parts) == 3 else 0)
