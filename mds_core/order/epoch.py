"""One epoch's settings.

The order settings with every default resolved for a world, and the steps all batching methods share (resampling,
partitioning, shuffling one stream or all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mds_core.order.mixing import resample_streams
from mds_core.order.partition import get_partitions
from mds_core.order.remap import first_read_per_node, remap_in_place, take_keeping_padding
from mds_core.order.shuffle import get_shuffle
from mds_core.order.spec import OrderSpec
from mds_core.order.world import World


@dataclass(frozen=True)
class EpochSettings:
    """Everything one epoch's batching needs, with the defaults resolved for this world."""

    spec: OrderSpec
    world: World
    epoch: int
    batch_size: int
    canonical_nodes: int
    block_size: int

    @property
    def global_batch_size(self) -> int:
        """Samples per step over all ranks."""
        return self.world.num_ranks * self.batch_size

    def resample(self, stream_id: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Each shard's sample ids after the streams' repeat or choose weights (of one stream, or all)."""
        spec = self.spec
        return resample_streams(
            spec.shard_sizes,
            spec.mix.choose,
            seed=spec.shuffle_seed,
            epoch=self.epoch,
            sampling_method=spec.sampling_method,
            sampling_granularity=spec.sampling_granularity,
            shuffle=spec.shuffle,
            stream_id=stream_id,
        )

    def units_and_table(self) -> tuple[NDArray[np.int64], NDArray[np.int64] | None, int]:
        """The epoch's shuffle units, its ``small_per_big`` table (``None`` for the identity) and its size.

        Where every stream gives exactly its samples, the table would be the identity: neither an
        N-sized table is built nor applied.
        """
        if self.takes_every_sample_once():
            sizes = np.concatenate([np.asarray(s, np.int64) for s in self.spec.shard_sizes])
            return sizes[sizes > 0], None, int(sizes.sum())
        units, small_per_big = self.resample()
        return units, small_per_big, len(small_per_big)

    def takes_every_sample_once(self) -> bool:
        """Whether each stream contributes exactly its samples, so resampling changes nothing."""
        return self.spec.mix.choose == self.spec.stream_sizes

    def positions(self, num_samples: int, num_nodes: int, batch_size: int, drop_first: int) -> NDArray[np.int64]:
        """The partition of ``num_samples`` positions over nodes, ranks and workers by the partition algorithm."""
        return get_partitions(
            self.spec.partition_algo,
            num_samples,
            self.canonical_nodes,
            num_nodes,
            self.world.ranks_per_node,
            self.world.workers_per_rank,
            batch_size,
            drop_first,
            self.spec.initial_physical_nodes,
        )

    def shuffled(
        self, positions: NDArray[np.int64], units: NDArray[np.int64], block_size: int, resumed: bool = False
    ) -> NDArray[np.int64]:
        """The shuffle applied to ``positions``; a ``resumed`` epoch computes only what they read."""
        if not self.spec.shuffle:
            return positions
        starts = first_read_per_node(positions, int(units.sum()), self.canonical_nodes) if resumed else None
        permutation = get_shuffle(
            self.spec.shuffle_algo,
            units,
            self.canonical_nodes,
            self.spec.shuffle_seed,
            self.epoch,
            block_size,
            starts=starts,
        )
        return remap_in_place(permutation, positions)

    def stream_block_size(self, stream_id: int) -> int:
        """The shuffle block of one stream when streams are shuffled one by one."""
        # Per-stream shuffles scale the block by the stream's share, so the block over all streams
        # stays about shuffle_block_size (and so does the cache a node needs).
        return int(self.block_size * self.spec.mix.proportion[stream_id])

    def stream_work(self, stream_id: int, num_nodes: int, batch_size: int) -> NDArray[np.int64]:
        """One stream's epoch alone, partitioned for ``num_nodes`` nodes and ``batch_size``, as small ids."""
        units, small_per_big = self.resample(stream_id)
        positions = self.positions(len(small_per_big), num_nodes, batch_size, 0)
        positions = self.shuffled(positions, units, self.stream_block_size(stream_id))
        return take_keeping_padding(small_per_big, positions)

    def shuffle_rng(self) -> np.random.Generator:
        """The generator that orders stream batches: per epoch only when shuffling with balanced sampling."""
        spec = self.spec
        varies = spec.shuffle and spec.sampling_method == "balanced"
        return np.random.default_rng(spec.shuffle_seed + self.epoch if varies else spec.shuffle_seed)
