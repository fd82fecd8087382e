"""One epoch's work: which global sample each (node, rank, worker, batch, slot) reads.

``generate_work`` reproduces Mosaic Streaming 0.13's ``generate_work`` for the four batching
methods (``docs/ordering.md``, "Batching"): resample the streams, partition the epoch's positions over
the world, shuffle them, and map them to global ("small") sample ids. The result has the shape
``(P, R, W, batches, B)`` with ``-1`` as padding, and the DataLoader traverses it as in §5.1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int
from mds_core.order.mixing import resample_streams
from mds_core.order.partition import get_partitions
from mds_core.order.shuffle import get_shuffle
from mds_core.order.spec import OrderSpec, check_batch_size

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# World


@dataclass(frozen=True)
class Topology:
    """The world order is computed for: nodes, ranks per node, DataLoader workers per rank."""

    num_nodes: int
    ranks_per_node: int
    workers_per_rank: int

    @property
    def num_ranks(self) -> int:
        return self.num_nodes * self.ranks_per_node


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
    as_int("replication", replication)
    num_ranks = num_nodes * ranks_per_node
    if num_ranks % replication:
        raise ConfigurationError(
            f"the world size ({num_ranks} ranks) must be divisible by replication={replication}: "
            "change replication or the number of ranks")
    parallel_ranks = num_ranks // replication
    parallel_nodes = parallel_ranks // ranks_per_node if parallel_ranks % ranks_per_node == 0 else 1
    return parallel_nodes, parallel_ranks // parallel_nodes


# --------------------------------------------------------------------------------------------------
# Entry point


def generate_work(source: OrderSpec | Any, num_nodes: int, ranks_per_node: int, workers_per_rank: int,
                  epoch: int, sample_in_epoch: int = 0) -> NDArray[np.int64]:
    """The whole epoch's global sample ids, shape ``(P, R, W, batches, B)``, ``-1`` for padding.

    ``source`` is an :class:`OrderSpec` or an object with an ``order_spec`` attribute (the
    dataset). The world is the physical one (``workers_per_rank`` is 1 without DataLoader workers);
    under ``replication`` the result has the replication-adjusted shape (:func:`replicate_world`).
    ``sample_in_epoch`` is how many of the epoch's samples were already consumed (resumption).
    """
    spec = _order_spec_of(source)
    nodes, ranks = replicate_world(num_nodes, ranks_per_node, spec.replication)
    world = Topology(nodes, ranks, as_int("workers_per_rank", workers_per_rank))
    if spec.batch_size is None:
        raise ConfigurationError(
            "batch_size is needed to order samples: pass batch_size to StreamingDataset (the per-device "
            "batch size, the same as the DataLoader's)")
    plan = _EpochPlan(spec=spec, world=world, epoch=as_int("epoch", epoch, 0),
                      batch_size=check_batch_size(spec.batch_size),
                      canonical_nodes=spec.canonical_nodes(nodes), block_size=spec.block_size(nodes))
    sample_in_epoch = as_int("sample_in_epoch", sample_in_epoch, 0)
    if spec.batching_method == "device_per_stream" and plan.canonical_nodes % nodes:
        raise ConfigurationError(
            f"device_per_stream batching needs num_canonical_nodes divisible by the number of physical "
            f"nodes; got {plan.canonical_nodes} canonical and {nodes} physical nodes: set "
            f"num_canonical_nodes to a multiple of {nodes}")
    return _BATCHING[spec.batching_method](plan, sample_in_epoch)


def _order_spec_of(source: Any) -> OrderSpec:
    spec = source if isinstance(source, OrderSpec) else getattr(source, "order_spec", None)
    if not isinstance(spec, OrderSpec):
        raise TypeError(f"generate_work needs an OrderSpec or an object with an order_spec, got {type(source).__name__}")
    return spec


@dataclass(frozen=True)
class _EpochPlan:
    """Everything one epoch's batching needs, with the defaults resolved for this world."""

    spec: OrderSpec
    world: Topology
    epoch: int
    batch_size: int
    canonical_nodes: int
    block_size: int

    @property
    def global_batch_size(self) -> int:
        return self.world.num_ranks * self.batch_size

    def resample(self, stream_id: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        spec = self.spec
        return resample_streams(spec.shard_sizes, spec.mix.choose, seed=spec.shuffle_seed, epoch=self.epoch,
                                sampling_method=spec.sampling_method,
                                sampling_granularity=spec.sampling_granularity, shuffle=spec.shuffle,
                                stream_id=stream_id)

    def takes_every_sample_once(self) -> bool:
        """Whether each stream contributes exactly its samples, so resampling changes nothing."""
        return self.spec.mix.choose == self.spec.stream_sizes

    def positions(self, num_samples: int, num_nodes: int, batch_size: int, drop_first: int) -> NDArray[np.int64]:
        return get_partitions(self.spec.partition_algo, num_samples, self.canonical_nodes, num_nodes,
                              self.world.ranks_per_node, self.world.workers_per_rank, batch_size, drop_first,
                              self.spec.initial_physical_nodes)

    def shuffled(self, positions: NDArray[np.int64], units: NDArray[np.int64], block_size: int,
                 resumed: bool = False) -> NDArray[np.int64]:
        """The shuffle applied to ``positions``; a ``resumed`` epoch computes only what they read."""
        if not self.spec.shuffle:
            return positions
        starts = first_read_per_node(positions, int(units.sum()), self.canonical_nodes) if resumed else None
        permutation = get_shuffle(self.spec.shuffle_algo, units, self.canonical_nodes, self.spec.shuffle_seed,
                                  self.epoch, block_size, starts=starts)
        return remap_in_place(permutation, positions)

    def stream_block_size(self, stream_id: int) -> int:
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


def first_read_per_node(positions: NDArray[np.int64], num_samples: int, num_canonical_nodes: int) -> list[int]:
    """Per CN, the offset within it of the first position that ``positions`` reads (its size if none).

    CN ``c`` holds positions ``[N*c//C, (c+1)*N//C)``, as in the shuffles. Padding (``-1``) is the
    largest value as uint64, so no filtered copy of ``positions`` is needed.
    """
    flat = _owning_buffer(positions)
    flat = (positions.reshape(-1) if flat is None else flat).view(np.uint64)  # the order does not matter
    bounds = [num_samples * cn // num_canonical_nodes for cn in range(num_canonical_nodes + 1)]
    if num_canonical_nodes == 1:
        first = int(flat.min()) if flat.size else num_samples
        return [min(first, num_samples)]
    is_read = np.zeros(num_samples + 1, bool)  # the last slot takes the padding
    for start in range(0, flat.size, _REMAP_CHUNK):
        is_read[np.minimum(flat[start : start + _REMAP_CHUNK], np.uint64(num_samples))] = True
    starts = []
    for lo, hi in zip(bounds, bounds[1:]):
        first = int(np.argmax(is_read[lo:hi])) if hi > lo else 0
        starts.append(first if hi > lo and is_read[lo + first] else hi - lo)
    return starts


def take_keeping_padding(table: NDArray[np.int64], positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """``table[positions]`` where positions are ``>= 0``; ``-1`` padding stays ``-1``."""
    out = table[positions]  # a -1 reads the last entry, which is overwritten just below
    out[positions < 0] = -1
    return out


_REMAP_CHUNK = 1 << 20


def _owning_buffer(positions: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """The flat, contiguous array ``positions`` views (in another layout), if it views all of one."""
    base = positions if positions.base is None else positions.base
    if not isinstance(base, np.ndarray) or base.size != positions.size or not base.flags.c_contiguous:
        return None
    return base.reshape(-1)


def remap_in_place(table: NDArray[np.int64], positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """:func:`take_keeping_padding`, written over ``positions``' own memory when it is the only view of it.

    The mapping is element-wise, so the layout does not matter; working through the owning buffer
    in chunks saves one N-sized array (800 MB at 100M samples) at the peak of epoch generation.
    """
    flat = _owning_buffer(positions)
    if flat is None or not flat.flags.writeable:
        return take_keeping_padding(table, positions)
    for start in range(0, flat.size, _REMAP_CHUNK):
        chunk = flat[start:start + _REMAP_CHUNK]
        padding = chunk < 0
        chunk[...] = table[chunk]
        chunk[padding] = -1
    return positions


# --------------------------------------------------------------------------------------------------
# Global batches in traversal order


def to_global_batches(work: NDArray[np.int64], global_batch_size: int) -> NDArray[np.int64]:
    """``(P, R, W, batches, B)`` -> one row per global batch, in the order the DataLoaders take them."""
    return work.transpose(3, 2, 0, 1, 4).reshape(-1, global_batch_size)


def from_global_batches(batches: NDArray[np.int64], world: Topology, batch_size: int) -> NDArray[np.int64]:
    """The inverse of :func:`to_global_batches`: rows of global batches -> ``(P, R, W, batches, B)``."""
    return batches.reshape(-1, world.workers_per_rank, world.num_nodes, world.ranks_per_node,
                           batch_size).transpose(2, 3, 1, 0, 4)


def _count_full_rows(rows: NDArray[np.int64]) -> int:
    """Rows without padding (the reference keeps that many leading rows)."""
    if rows.shape[0] == 0:
        return 0
    return int(np.count_nonzero(rows.min(axis=1) >= 0))


def _resume_and_shape(batches: NDArray[np.int64], plan: _EpochPlan, sample_in_epoch: int,
                      method: str) -> NDArray[np.int64]:
    """Drop the global batches already consumed, pad to whole worker rounds, shape as work.

    The stream-aware methods resume only at global-batch granularity.
    """
    global_batch = plan.global_batch_size
    if sample_in_epoch % global_batch:
        logger.warning("%s batching resumes only at a multiple of the global batch size (%d); resuming "
                       "after the last complete global batch before sample %d", method, global_batch,
                       sample_in_epoch)
    batches = batches[sample_in_epoch // global_batch:]
    # Every worker of every rank must get the same number of batches.
    missing = -batches.shape[0] % plan.world.workers_per_rank
    if missing:
        batches = np.concatenate([batches, np.full((missing, global_batch), -1, np.int64)])
    return from_global_batches(batches, plan.world, plan.batch_size)


def _stream_batch_order(batches_per_stream: list[int], rng: np.random.Generator) -> NDArray[np.int64]:
    """Interleave streams' batches in a random stream order; each stream keeps its own batch order.

    Returns indices into the streams' batches concatenated in stream order.
    """
    origins = np.repeat(np.arange(len(batches_per_stream)), batches_per_stream)
    rng.shuffle(origins)
    # The i-th occurrence of stream s takes that stream's i-th batch: a stable sort by stream lists
    # the slots of stream 0 first, then stream 1, ..., each in slot order.
    order = np.empty(len(origins), np.int64)
    order[np.argsort(origins, kind="stable")] = np.arange(len(origins))
    return order


# --------------------------------------------------------------------------------------------------
# The four batching methods


def _random_batching(plan: _EpochPlan, sample_in_epoch: int) -> NDArray[np.int64]:
    """Streams mixed sample by sample: one resampling, partition and shuffle over all streams."""
    if plan.takes_every_sample_once():
        # small_per_big would be the identity: skip building and applying an N-sized table.
        sizes = np.concatenate([np.asarray(s, np.int64) for s in plan.spec.shard_sizes])
        positions = plan.positions(int(sizes.sum()), plan.world.num_nodes, plan.batch_size, sample_in_epoch)
        return plan.shuffled(positions, sizes[sizes > 0], plan.block_size, resumed=sample_in_epoch > 0)
    units, small_per_big = plan.resample()
    positions = plan.positions(len(small_per_big), plan.world.num_nodes, plan.batch_size, sample_in_epoch)
    positions = plan.shuffled(positions, units, plan.block_size, resumed=sample_in_epoch > 0)
    return take_keeping_padding(small_per_big, positions)


def _per_stream_batching(plan: _EpochPlan, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every global batch from one stream; streams' batches interleaved at random."""
    global_batch = plan.global_batch_size
    kept, counts = [], []
    for stream_id in range(plan.spec.num_streams):
        rows = to_global_batches(plan.stream_work(stream_id, plan.world.num_nodes, plan.batch_size), global_batch)
        full = _count_full_rows(rows)
        if full == 0:
            raise ConfigurationError(
                f"stream {stream_id} has too few samples this epoch ({plan.spec.mix.choose[stream_id]}) for one "
                f"complete global batch of {global_batch} with per_stream batching: raise its weight or "
                "lower the batch size")
        if full < rows.shape[0]:
            logger.warning("per_stream batching drops %d incomplete global batch(es) of stream %d",
                           rows.shape[0] - full, stream_id)
        kept.append(rows[:full])
        counts.append(full)
    batches = np.concatenate(kept)[_stream_batch_order(counts, plan.shuffle_rng())]
    return _resume_and_shape(batches, plan, sample_in_epoch, "per_stream")


def stratified_portions(proportions: tuple[float, ...], global_batch_size: int) -> NDArray[np.int64]:
    """Samples per stream in every global batch: floor(p * G), the deficit to the largest remainders.

    Ties go to the higher stream index. The reference sorts with numpy's default (unstable) sort
    and flips it; on small arrays that behaves like this stable rule, which we make explicit so the
    result does not depend on the CPU's sorting kernels.
    """
    shares = np.array(proportions, np.float64)
    portions = (shares * global_batch_size).astype(np.int64)
    deficit = global_batch_size - int(portions.sum())
    if deficit > 0:
        remainders = global_batch_size * shares - portions
        portions[np.flip(np.argsort(remainders, kind="stable"))[:deficit]] += 1
    return portions


def _stratified_batching(plan: _EpochPlan, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every global batch holds a fixed number of samples of each stream, in stream order."""
    global_batch = plan.global_batch_size
    portions = stratified_portions(plan.spec.mix.proportion, global_batch)
    for stream_id, portion in enumerate(portions):
        if portion <= 0:
            raise ConfigurationError(
                f"stream {stream_id} gets {int(portion)} samples per global batch of {global_batch} with "
                f"stratified batching: raise the global batch size or stream {stream_id}'s proportion")
    parts, full_counts = [], []
    for stream_id, portion in enumerate(portions):
        # Partitioned as one node with batch size 1: only the traversal order matters here.
        flat = to_global_batches(plan.stream_work(stream_id, 1, 1), 1).ravel()
        flat = np.concatenate([flat, np.full(-flat.size % portion, -1, np.int64)])
        rows = flat.reshape(-1, portion)
        full = _count_full_rows(rows)
        if full < rows.shape[0]:
            logger.warning("stratified batching drops %d incomplete part(s) of stream %d",
                           rows.shape[0] - full, stream_id)
        parts.append(rows)
        full_counts.append(full)
    num_batches = min(full_counts)
    batches = np.concatenate([rows[:num_batches] for rows in parts], axis=1)
    return _resume_and_shape(batches, plan, sample_in_epoch, "stratified")


def _device_per_stream_batching(plan: _EpochPlan, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every device batch from one stream; each node draws from its own canonical nodes' rows."""
    world, batch_size = plan.world, plan.batch_size
    canonical = plan.canonical_nodes
    stream_works = []
    for stream_id in range(plan.spec.num_streams):
        if plan.spec.shuffle and plan.stream_block_size(stream_id) == 0:
            raise ConfigurationError(
                f"stream {stream_id}'s shuffle block (shuffle_block_size {plan.block_size} x its proportion "
                f"{plan.spec.mix.proportion[stream_id]:.4g}) is 0 with device_per_stream batching: raise "
                "shuffle_block_size or the stream's proportion")
        # Partitioned as if every canonical node were a physical node, one sample per batch.
        stream_works.append(plan.stream_work(stream_id, canonical, 1))
    per_node = canonical // world.num_nodes
    node_batches, node_counts = [], []
    for node in range(world.num_nodes):
        rows_per_stream = [_device_batches_of_node(work, node, per_node, batch_size, stream_id)
                           for stream_id, work in enumerate(stream_works)]
        node_batches.append(np.concatenate(rows_per_stream))
        node_counts.append([len(rows) for rows in rows_per_stream])
    # Every node gets the same number of device batches: the largest, raised (always, as the
    # reference does) to the next multiple of the device count.
    longest = max(len(rows) for rows in node_batches)
    longest += world.num_ranks - longest % world.num_ranks
    rng = plan.shuffle_rng()  # one generator for all nodes, in node order
    for node in range(world.num_nodes):
        ordered = node_batches[node][_stream_batch_order(node_counts[node], rng)]
        padding = np.full((longest - len(ordered), batch_size), -1, np.int64)
        node_batches[node] = np.concatenate([ordered, padding])
    # Node-interleaved device batches, cut into global batches. Device (p, r) gets element p*R + r of
    # each round, which is not node p's canonical nodes (reference issue #726); kept for the order.
    batches = np.stack(node_batches, axis=1).reshape(-1, plan.global_batch_size)
    return _resume_and_shape(batches, plan, sample_in_epoch, "device_per_stream")


def _device_batches_of_node(work: NDArray[np.int64], node: int, canonical_per_node: int, batch_size: int,
                            stream_id: int) -> NDArray[np.int64]:
    """Node ``node``'s canonical-node rows of one stream, in traversal order, as full device batches."""
    rows = work[node * canonical_per_node:(node + 1) * canonical_per_node]
    flat = to_global_batches(rows, 1).ravel()
    # The reference always appends padding (a whole batch when already aligned); only full rows stay.
    flat = np.concatenate([flat, np.full(batch_size - flat.size % batch_size, -1, np.int64)])
    batches = flat.reshape(-1, batch_size)
    full = _count_full_rows(batches)
    if full == 0:
        raise ConfigurationError(
            f"stream {stream_id} has too few samples for one device batch of {batch_size} on node {node} "
            "with device_per_stream batching: raise its weight or lower the batch size")
    if full < batches.shape[0] - 1:
        logger.warning("device_per_stream batching drops %d incomplete batch(es) of stream %d on node %d",
                       batches.shape[0] - 1 - full, stream_id, node)
    return batches[:full]


_BATCHING: dict[str, Callable[[_EpochPlan, int], NDArray[np.int64]]] = {
    "random": _random_batching,
    "stratified": _stratified_batching,
    "per_stream": _per_stream_batching,
    "device_per_stream": _device_per_stream_batching,
}
