"""``streaming.base.world``: ``World(num_nodes, ranks_per_node, workers_per_rank, worker)``.

The reference numbers workers globally; mds_core's ``World`` takes the rank and the worker of the
rank, which the global worker number determines.
"""

from __future__ import annotations

from mds_core.order import World as _World

__all__ = ["World"]


def World(num_nodes: int, ranks_per_node: int, workers_per_rank: int, worker: int) -> _World:
    rank, worker_of_rank = divmod(worker, workers_per_rank)
    return _World(
        num_nodes=num_nodes,
        ranks_per_node=ranks_per_node,
        rank=rank,
        workers_per_rank=workers_per_rank,
        worker_of_rank=worker_of_rank,
    )
