"""The DataLoader's traversal of an epoch's work array, and its inverse.

An epoch's work has the shape ``(P, R, W, batches, B)``: nodes, ranks per node, workers per rank,
batches per worker, batch size. The DataLoader takes batch 0 of worker 0, batch 0 of worker 1, ...
and each step's global batch is the devices' batches in rank order, hence the axis order
(batch, worker, node, rank, sample).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from mds_core.order.world import World

_TRAVERSAL_AXES = (3, 2, 0, 1, 4)


def to_global_batches(work: NDArray[np.int64], global_batch_size: int) -> NDArray[np.int64]:
    """``(P, R, W, batches, B)`` -> one row per global batch, in the order the DataLoaders take them."""
    return work.transpose(_TRAVERSAL_AXES).reshape(-1, global_batch_size)


def traversal_order(work: NDArray[np.int64]) -> NDArray[np.int64]:
    """Flatten a ``(P, R, W, batches, B)`` array in global traversal order, ``-1`` included."""
    return work.transpose(_TRAVERSAL_AXES).ravel()


def from_global_batches(batches: NDArray[np.int64], world: World, batch_size: int) -> NDArray[np.int64]:
    """The inverse of :func:`to_global_batches`: rows of global batches -> ``(P, R, W, batches, B)``."""
    return batches.reshape(-1, world.workers_per_rank, world.num_nodes, world.ranks_per_node, batch_size).transpose(
        2, 3, 1, 0, 4
    )
