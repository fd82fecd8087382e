"""What each node reads, step by step: the exact input of every figure the planner computes.

A node's ranks take one batch per training step; rank ``r`` takes step ``t``'s batch from its
worker ``t % W`` (``mds_core.order.traversal``). So step ``t`` of node ``n`` reads
``work[n, :, t % W, t // W, :]``, and a shard is needed by the node at the first step that reads one
of its samples. Only (step, shard) pairs are kept: which sample of a shard is read does not change
what is downloaded or cached.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class NodeReads:
    """The distinct shards each step of one node's epoch reads, as parallel arrays sorted by step."""

    steps: NDArray[np.int64]  # the step of each (step, shard) pair
    shards: NDArray[np.int64]  # the global shard id of each pair
    num_steps: int

    def first_use(self, num_shards: int) -> NDArray[np.int64]:
        """For every shard, the first step that reads it, or -1 when this node never does."""
        first = np.full(num_shards, -1, np.int64)
        # Pairs are sorted by step: assigning in reverse leaves each shard's earliest step.
        first[self.shards[::-1]] = self.steps[::-1]
        return first

    def last_use(self, num_shards: int) -> NDArray[np.int64]:
        """The last step that reads each shard, -1 for a shard never read."""
        last = np.full(num_shards, -1, np.int64)
        last[self.shards] = self.steps
        return last

    def used(self) -> NDArray[np.int64]:
        """The distinct shards this node reads in the epoch."""
        return np.unique(self.shards)


def node_reads(work: NDArray[np.int64], node: int, shard_ends: NDArray[np.int64]) -> NodeReads:
    """Node ``node``'s (step, shard) pairs for an epoch's work array of shape ``(P, R, W, batches, B)``."""
    _, ranks, workers, batches, batch_size = work.shape
    by_step = work[node].transpose(2, 1, 0, 3).reshape(batches * workers, ranks * batch_size)
    steps = np.repeat(np.arange(len(by_step), dtype=np.int64), by_step.shape[1])
    ids = by_step.ravel()
    real = ids >= 0  # -1 pads the last batches
    shard = np.searchsorted(shard_ends, ids[real], side="right")
    num_shards = len(shard_ends)
    keys = np.unique(steps[real] * num_shards + shard)
    return NodeReads(steps=keys // num_shards, shards=keys % num_shards, num_steps=len(by_step))
