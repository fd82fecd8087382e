"""``streaming.base.batching``: ``generate_work(batching_method, dataset, world, epoch, sample_in_epoch)``."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.order import World
from mds_core.order import generate_work as _generate_work

__all__ = ["generate_work"]


def generate_work(
    batching_method: str, dataset: Any, world: World, epoch: int, sample_in_epoch: int
) -> NDArray[np.int64]:
    spec = dataclasses.replace(dataset.order_spec, batching_method=batching_method)
    return _generate_work(spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank, epoch, sample_in_epoch)
