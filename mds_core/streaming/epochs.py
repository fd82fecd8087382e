"""The reference's epochs.

Each epoch's order computed once per node for the world, shared through the job directory, and read by each worker as
its own row (``mds_core.order.generate_work``); its first batches are made first (``generate_head``, ``StagedRow``).
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from mds_core.order import OrderSpec, generate_work
from mds_core.order.work import generate_head
from mds_core.order.world import World
from mds_core.streaming.jobdir import JobDir
from mds_core.streaming.local import LocalDataset, ordering
from mds_core.streaming.resume import OrderState
from mds_core.streaming.staged import StagedRow

HEAD_ROUNDS = 16  # batches per worker made before the rest of the epoch's order (StagedRow)
# Below this many samples an epoch's whole order takes a few ms and its first batches cost half of that or
# more (a py1e shuffle block holds up to 4M samples, and the head orders the window it reads): the head would be
# a second order, a second shared file and a thread beside the first batches, for nothing. Measured on 2 cores:
# whole / head 2.1 / 1.6 ms at 20,000 samples, 9.9 / 5.0 ms at 100,000, 93 / 37 ms at 10**6.
HEAD_MIN_SAMPLES = 1 << 16


class CanonicalEpochs:
    """A dataset's epochs without a schedule: canonical nodes, partitions and shuffles as the reference's."""

    def __init__(
        self, job: JobDir, readers: list[LocalDataset], spec: OrderSpec, replication: int | None, shuffle_seed: int
    ) -> None:
        self._job, self.readers, self.order_spec = job, readers, spec
        self.replication, self.shuffle_seed = replication, shuffle_seed

    def row(self, world: World, epoch: int, sample_in_epoch: int, state: OrderState | None) -> np.ndarray | StagedRow:
        """This worker's sample ids for the epoch, computed once per node and shared.

        Where the settings allow it, the first batches come at once and the rest on a thread (:class:`StagedRow`).
        """
        spec = self._spec_for(state, world)
        shape = f"{world.num_nodes}x{world.ranks_per_node}x{world.workers_per_rank}"
        key = f"work-e{epoch}-s{sample_in_epoch}-{shape}-{_short_hash(repr(spec))}"
        sizes = (world.num_nodes, world.ranks_per_node, world.workers_per_rank, epoch, sample_in_epoch)

        def compute_head() -> np.ndarray:
            with ordering(self.readers, spec.samples_per_epoch, epoch):  # refused here, before any batch
                head = generate_head(spec, *sizes, HEAD_ROUNDS)
            return np.empty(0, np.int32) if head is None else _narrow(head)

        def compute() -> np.ndarray:
            self._job.remove_files(f"work-e{epoch - 2}-", keep=set())  # two epochs back is done everywhere
            # Checked here, in the one process that computes: the check reads every shard's entry, and a
            # DataLoader worker that reads them copies the pages they lie on from the rank it forked from.
            with ordering(self.readers, spec.samples_per_epoch, epoch):
                return _narrow(generate_work(spec, *sizes))

        parallel = world.replicate(self.replication)

        def of_this_worker(work: np.ndarray) -> np.ndarray:
            return _without_padding(np.asarray(work[parallel.node, parallel.rank_of_node, world.worker_of_rank]))

        def whole() -> np.ndarray:
            return of_this_worker(self._job.shared_array(key, compute))

        if spec.samples_per_epoch < HEAD_MIN_SAMPLES:
            return whole()
        head = self._job.shared_array(f"{key}-head", compute_head)
        return StagedRow(of_this_worker(head), whole) if head.size else whole()

    def _spec_for(self, state: OrderState | None, world: World) -> OrderSpec:
        """The order settings, with a resumed state's canonical nodes, seed and initial node count."""
        parallel_nodes = world.replicate(self.replication).num_nodes
        if state is None:
            return dataclasses.replace(
                self.order_spec, num_canonical_nodes=self.order_spec.canonical_nodes(parallel_nodes)
            )
        return dataclasses.replace(
            self.order_spec,
            num_canonical_nodes=state["num_canonical_nodes"],
            shuffle_seed=state["shuffle_seed"],
            initial_physical_nodes=state["initial_physical_nodes"],
            weights_seed=self.shuffle_seed,  # the reference weighs streams once, with the constructor's seed
        )


def _narrow(work: np.ndarray) -> np.ndarray:
    """Half the bytes in the node's shared file (and in every worker's pages of it) where ids fit."""
    return work.astype(np.int32) if work.size and int(work.max()) < 2**31 else work


def _without_padding(work: np.ndarray) -> np.ndarray:
    """A worker's ids without the -1 padding, as a view of the node's shared array where it can be.

    Where the padding only trails (the usual case) no worker holds a private copy of its part of the
    epoch; padding inside the row (some batching methods) makes a copy.
    """
    row = work.reshape(-1).view(np.ndarray)  # the worker's (batches, batch) block is contiguous: a view
    kept = row >= 0
    count = int(np.count_nonzero(kept))
    return row[:count] if bool(kept[:count].all()) else row[kept]


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
