"""The four batching methods: how an epoch's samples become global batches.

``random`` mixes streams sample by sample; ``per_stream`` makes every global batch from one
stream; ``stratified`` gives every global batch a fixed share of each stream; ``device_per_stream``
makes every device batch from one stream. All reproduce Mosaic Streaming 0.13 (``docs/ordering.md``,
"Batching") and return the work array ``(P, R, W, batches, B)`` with ``-1`` as padding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.epoch import EpochSettings
from mds_core.order.remap import take_keeping_padding
from mds_core.order.traversal import from_global_batches, to_global_batches

logger = logging.getLogger(__name__)


def _count_full_rows(rows: NDArray[np.int64]) -> int:
    """Rows without padding (the reference keeps that many leading rows)."""
    if rows.shape[0] == 0:
        return 0
    return int(np.count_nonzero(rows.min(axis=1) >= 0))


def _resume_and_shape(
    batches: NDArray[np.int64], settings: EpochSettings, sample_in_epoch: int, method: str
) -> NDArray[np.int64]:
    """Drop the global batches already consumed, pad to whole worker rounds, shape as work.

    The stream-aware methods resume only at global-batch granularity.
    """
    global_batch = settings.global_batch_size
    if sample_in_epoch % global_batch:
        logger.warning(
            "%s batching resumes only at a multiple of the global batch size (%d); resuming "
            "after the last complete global batch before sample %d",
            method,
            global_batch,
            sample_in_epoch,
        )
    batches = batches[sample_in_epoch // global_batch :]
    # Every worker of every rank must get the same number of batches.
    missing = -batches.shape[0] % settings.world.workers_per_rank
    if missing:
        batches = np.concatenate([batches, np.full((missing, global_batch), -1, np.int64)])
    return from_global_batches(batches, settings.world, settings.batch_size)


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


def _random_batching(settings: EpochSettings, sample_in_epoch: int) -> NDArray[np.int64]:
    """Streams mixed sample by sample: one resampling, partition and shuffle over all streams."""
    units, small_per_big, num_samples = settings.units_and_table()
    positions = settings.positions(num_samples, settings.world.num_nodes, settings.batch_size, sample_in_epoch)
    positions = settings.shuffled(positions, units, settings.block_size, resumed=sample_in_epoch > 0)
    return positions if small_per_big is None else take_keeping_padding(small_per_big, positions)


def _per_stream_batching(settings: EpochSettings, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every global batch from one stream; streams' batches interleaved at random."""
    global_batch = settings.global_batch_size
    kept, counts = [], []
    for stream_id in range(settings.spec.num_streams):
        rows = to_global_batches(
            settings.stream_work(stream_id, settings.world.num_nodes, settings.batch_size), global_batch
        )
        full = _count_full_rows(rows)
        if full == 0:
            raise ConfigurationError(
                f"stream {stream_id} has too few samples this epoch ({settings.spec.mix.choose[stream_id]}) for one "
                f"complete global batch of {global_batch} with per_stream batching: raise its weight or "
                "lower the batch size"
            )
        if full < rows.shape[0]:
            logger.warning(
                "per_stream batching drops %d incomplete global batch(es) of stream %d", rows.shape[0] - full, stream_id
            )
        kept.append(rows[:full])
        counts.append(full)
    batches = np.concatenate(kept)[_stream_batch_order(counts, settings.shuffle_rng())]
    return _resume_and_shape(batches, settings, sample_in_epoch, "per_stream")


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


def _stratified_batching(settings: EpochSettings, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every global batch holds a fixed number of samples of each stream, in stream order."""
    global_batch = settings.global_batch_size
    portions = stratified_portions(settings.spec.mix.proportion, global_batch)
    for stream_id, portion in enumerate(portions):
        if portion <= 0:
            raise ConfigurationError(
                f"Number of samples for stream {stream_id} is {int(portion)} per global batch of {global_batch} "
                f"with stratified batching: raise the global batch size or stream {stream_id}'s proportion"
            )
    parts, full_counts = [], []
    for stream_id, portion in enumerate(portions):
        # Partitioned as one node with batch size 1: only the traversal order matters here.
        flat = to_global_batches(settings.stream_work(stream_id, 1, 1), 1).ravel()
        flat = np.concatenate([flat, np.full(-flat.size % portion, -1, np.int64)])
        rows = flat.reshape(-1, portion)
        full = _count_full_rows(rows)
        if full < rows.shape[0]:
            logger.warning(
                "stratified batching drops %d incomplete part(s) of stream %d", rows.shape[0] - full, stream_id
            )
        parts.append(rows)
        full_counts.append(full)
    num_batches = min(full_counts)
    batches = np.concatenate([rows[:num_batches] for rows in parts], axis=1)
    return _resume_and_shape(batches, settings, sample_in_epoch, "stratified")


def _device_per_stream_batching(settings: EpochSettings, sample_in_epoch: int) -> NDArray[np.int64]:
    """Every device batch from one stream; each node draws from its own canonical nodes' rows."""
    world, batch_size = settings.world, settings.batch_size
    canonical = settings.canonical_nodes
    stream_works = []
    for stream_id in range(settings.spec.num_streams):
        if settings.spec.shuffle and settings.stream_block_size(stream_id) == 0:
            raise ConfigurationError(
                f"stream {stream_id}'s shuffle block (shuffle_block_size {settings.block_size} x its proportion "
                f"{settings.spec.mix.proportion[stream_id]:.4g}) is 0 with device_per_stream batching: raise "
                "shuffle_block_size or the stream's proportion"
            )
        # Partitioned as if every canonical node were a physical node, one sample per batch.
        stream_works.append(settings.stream_work(stream_id, canonical, 1))
    per_node = canonical // world.num_nodes
    node_batches, node_counts = [], []
    for node in range(world.num_nodes):
        rows_per_stream = [
            _device_batches_of_node(work, node, per_node, batch_size, stream_id)
            for stream_id, work in enumerate(stream_works)
        ]
        node_batches.append(np.concatenate(rows_per_stream))
        node_counts.append([len(rows) for rows in rows_per_stream])
    # Every node gets the same number of device batches: the largest, raised (always, as the
    # reference does) to the next multiple of the device count.
    longest = max(len(rows) for rows in node_batches)
    longest += world.num_ranks - longest % world.num_ranks
    rng = settings.shuffle_rng()  # one generator for all nodes, in node order
    for node in range(world.num_nodes):
        ordered = node_batches[node][_stream_batch_order(node_counts[node], rng)]
        padding = np.full((longest - len(ordered), batch_size), -1, np.int64)
        node_batches[node] = np.concatenate([ordered, padding])
    # Node-interleaved device batches, cut into global batches. Device (p, r) gets element p*R + r of
    # each round, which is not node p's canonical nodes (reference issue #726); kept for the order.
    batches = np.stack(node_batches, axis=1).reshape(-1, settings.global_batch_size)
    return _resume_and_shape(batches, settings, sample_in_epoch, "device_per_stream")


def _device_batches_of_node(
    work: NDArray[np.int64], node: int, canonical_per_node: int, batch_size: int, stream_id: int
) -> NDArray[np.int64]:
    """Node ``node``'s canonical-node rows of one stream, in traversal order, as full device batches."""
    rows = work[node * canonical_per_node : (node + 1) * canonical_per_node]
    flat = to_global_batches(rows, 1).ravel()
    # The reference always appends padding (a whole batch when already aligned); only full rows stay.
    flat = np.concatenate([flat, np.full(batch_size - flat.size % batch_size, -1, np.int64)])
    batches = flat.reshape(-1, batch_size)
    full = _count_full_rows(batches)
    if full == 0:
        raise ConfigurationError(
            f"stream {stream_id} has too few samples for one device batch of {batch_size} on node {node} "
            "with device_per_stream batching: raise its weight or lower the batch size"
        )
    dropped = int(np.count_nonzero(batches[full:] >= 0))  # real samples in the incomplete batches
    if dropped:
        logger.warning(
            "device_per_stream batching drops %d sample(s) of stream %d on node %d that do not fill a device batch",
            dropped,
            stream_id,
            node,
        )
    return batches[:full]


BATCHING: dict[str, Callable[[EpochSettings, int], NDArray[np.int64]]] = {
    "random": _random_batching,
    "stratified": _stratified_batching,
    "per_stream": _per_stream_batching,
    "device_per_stream": _device_per_stream_batching,
}
