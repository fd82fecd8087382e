"""The topology of this process: nodes, ranks per node, this rank, and DataLoader workers.

Read from the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``)
and from ``torch.utils.data.get_worker_info()`` inside DataLoader workers, as the reference does.
Ranks are assumed node-contiguous with the same number per node.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Mapping

from mds_core.errors import ConfigurationError
from mds_core.order.batching import replicate_world


@dataclass(frozen=True)
class World:
    num_nodes: int = 1
    ranks_per_node: int = 1
    rank: int = 0
    workers_per_rank: int = 1
    worker_of_rank: int = 0

    @property
    def num_ranks(self) -> int:
        return self.num_nodes * self.ranks_per_node

    @property
    def node(self) -> int:
        return self.rank // self.ranks_per_node

    @property
    def rank_of_node(self) -> int:
        return self.rank % self.ranks_per_node

    @property
    def is_local_leader(self) -> bool:
        """Worker 0 of local rank 0: the one process per node that does node-wide work first."""
        return self.rank_of_node == 0 and self.worker_of_rank == 0

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None) -> "World":
        """This process's world from the environment and, inside a DataLoader worker, its worker info."""
        env = os.environ if environ is None else environ
        rank = _env_int(env, "RANK", 0)
        world_size = _env_int(env, "WORLD_SIZE", 1)
        local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", 1)
        local_rank = _env_int(env, "LOCAL_RANK", rank % local_world_size)
        if world_size < 1 or local_world_size < 1 or world_size % local_world_size:
            raise ConfigurationError(
                f"WORLD_SIZE={world_size} must be a positive multiple of LOCAL_WORLD_SIZE={local_world_size}"
            )
        if not 0 <= rank < world_size or local_rank != rank % local_world_size:
            raise ConfigurationError(
                f"RANK={rank}, LOCAL_RANK={local_rank} do not fit WORLD_SIZE={world_size} with "
                f"LOCAL_WORLD_SIZE={local_world_size} (ranks must be node-contiguous)"
            )
        workers, worker = _worker_info()
        return cls(world_size // local_world_size, local_world_size, rank, workers, worker)

    def with_workers(self, workers_per_rank: int, worker_of_rank: int) -> "World":
        return replace(self, workers_per_rank=workers_per_rank, worker_of_rank=worker_of_rank)

    def replicate(self, replication: int | None) -> "World":
        """The world used for partitioning when ``replication`` consecutive ranks share samples.

        Ranks ``r`` become ``r // replication``; the parallel ranks form nodes of the physical
        size when they divide evenly, else one node (as in the reference).
        """
        if replication is None or replication == 1:
            return self
        nodes, per_node = replicate_world(self.num_nodes, self.ranks_per_node, replication)
        return World(nodes, per_node, self.rank // replication, self.workers_per_rank, self.worker_of_rank)


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"environment variable {name}={value!r} must be an integer") from None


def _worker_info() -> tuple[int, int]:
    """(workers per rank, this worker) inside a DataLoader worker, else (1, 0)."""
    # A DataLoader worker has torch loaded already; importing it otherwise would cost seconds.
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 1, 0
    info = torch_data.get_worker_info()
    return (info.num_workers, info.id) if info is not None else (1, 0)
