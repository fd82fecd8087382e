"""The world an order is computed for: nodes, ranks per node, DataLoader workers per rank.

One type serves everywhere: the running process's world (``mds_core.streaming.world.detect_world``
fills in which rank and worker it is), the world an epoch is partitioned for, and the worlds
``mds check-order`` simulates. Ranks are node-contiguous, with the same number on every node.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int


@dataclass(frozen=True)
class World:
    """Nodes, ranks per node, this rank, and DataLoader workers per rank."""

    num_nodes: int = 1
    ranks_per_node: int = 1
    rank: int = 0
    workers_per_rank: int = 1
    worker_of_rank: int = 0

    @property
    def num_ranks(self) -> int:
        """Ranks over all nodes."""
        return self.num_nodes * self.ranks_per_node

    @property
    def node(self) -> int:
        """The node this rank is on."""
        return self.rank // self.ranks_per_node

    @property
    def rank_of_node(self) -> int:
        """This rank's place among its node's ranks."""
        return self.rank % self.ranks_per_node

    @property
    def is_local_leader(self) -> bool:
        """Worker 0 of local rank 0: the one process per node that does node-wide work first."""
        return self.rank_of_node == 0 and self.worker_of_rank == 0

    def replicate(self, replication: int | None) -> World:
        """The world used for partitioning when ``replication`` consecutive ranks share samples.

        Ranks ``r`` become ``r // replication``; the parallel ranks form nodes of the physical
        size when they divide evenly, else one node (as in the reference).
        """
        if replication is None or replication == 1:
            return self
        nodes, per_node = replicate_world(self.num_nodes, self.ranks_per_node, replication)
        return replace(self, num_nodes=nodes, ranks_per_node=per_node, rank=self.rank // replication)

    def __str__(self) -> str:
        return f"{self.num_nodes} node(s) x {self.ranks_per_node} rank(s), {self.workers_per_rank} worker(s)"


def replicate_world(num_nodes: int, ranks_per_node: int, replication: int | None) -> tuple[int, int]:
    """The (nodes, ranks per node) that partitioning sees when ``replication`` ranks share samples.

    ``replication`` consecutive ranks get identical samples, so the epoch is split over
    ``num_ranks // replication`` "parallel" ranks: as nodes of the physical size when that divides,
    else as one node (reference ``World.replicate``). Workers per rank are unchanged.
    """
    as_int("num_nodes", num_nodes)
    as_int("ranks_per_node", ranks_per_node)
    if replication is None:
        return num_nodes, ranks_per_node
    if as_int("replication", replication, None) < 1:
        raise ConfigurationError(f"Replication factor must be positive: got replication={replication}")
    num_ranks = num_nodes * ranks_per_node
    if num_ranks % replication:
        raise ConfigurationError(
            f"World size must be divisible by your replication factor: {num_ranks} ranks are not divisible by "
            f"replication={replication}; change replication or the number of ranks"
        )
    parallel_ranks = num_ranks // replication
    parallel_nodes = parallel_ranks // ranks_per_node if parallel_ranks % ranks_per_node == 0 else 1
    return parallel_nodes, parallel_ranks // parallel_nodes


# The training world `mds plan` and the pipelines' training_plan check plan for unless told otherwise:
# one node of eight GPUs, each rank's DataLoader with eight workers.
DEFAULT_WORLD = "1x8x8"


def parse_world(text: str, *, zero_workers: bool = True) -> World:
    """Parse ``"2x4"`` (nodes x ranks per node) or ``"2x4x2"`` (and DataLoader workers per rank).

    0 workers (reading in the rank process) orders samples as 1 does.

    A field that is zero or negative is named in the error. With ``zero_workers=False`` (``mds plan``),
    0 workers is refused too, rather than read as the one worker whose order it has.
    """
    shape = f"world {text!r} must look like NODESxRANKS or NODESxRANKSxWORKERS, e.g. 2x4 or 2x4x2"
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3):
        raise ConfigurationError(shape)
    form = "NODESxRANKS" if len(parts) == 2 else "NODESxRANKSxWORKERS"
    for field, (name, value) in enumerate(zip(("nodes", "ranks per node", "workers per rank"), parts)):
        least = 0 if field == 2 and zero_workers else 1
        if value < least:
            hint = "" if field < 2 or value < 0 else f". {_ZERO_WORKERS} {parts[0]}x{parts[1]}x1"
            raise ConfigurationError(f"world {text!r}: {name} is {value}, must be at least {least} ({form}){hint}")
    # Iterating in the rank process (0 workers) orders samples exactly like one worker.
    workers = max(parts[2], 1) if len(parts) == 3 else 1
    return World(num_nodes=parts[0], ranks_per_node=parts[1], workers_per_rank=workers)


_ZERO_WORKERS = "DataLoader(num_workers=0) reads in the rank process, in the order of one worker: plan it as"
