"""Partitions: lay an epoch's sample positions out over nodes, ranks, workers and batches.

``get_partitions(...)`` returns an int64 array of shape ``(P, R, W, batches_per_worker, B)`` whose
entries are epoch *positions* ``0..N-1`` (later mapped through the shuffle) or ``-1`` for padding,
identical to Mosaic Streaming 0.13 (``docs/ordering.md``, "Partitions").

The layout is built so that, read in the DataLoader's traversal order (``traversal_order``), global
batch ``t`` holds the ``t``-th window of ``G = P*R*B`` entries of one sequence that depends only on
``(N, C, drop_first)``: that is what makes the order survive a change of world size. Every repeat
and every ``-1`` sits at the end of the epoch.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int
from mds_core.order.traversal import traversal_order

logger = logging.getLogger(__name__)

PartitionFn = Callable[[int, int, int, int, int, int, int, int | None], NDArray[np.int64]]


def nodes_compatible(num_canonical_nodes: int, num_physical_nodes: int) -> bool:
    """Whether one node count divides the other, so each node streams whole canonical nodes."""
    if num_canonical_nodes >= num_physical_nodes:
        return num_canonical_nodes % num_physical_nodes == 0
    return num_physical_nodes % num_canonical_nodes == 0


def _require_compatible(num_canonical_nodes: int, num_physical_nodes: int) -> None:
    if not nodes_compatible(num_canonical_nodes, num_physical_nodes):
        raise ConfigurationError(
            "Either canonical or physical nodes must be evenly divisible by the other: "
            f"num_canonical_nodes={num_canonical_nodes} and {num_physical_nodes} physical nodes; otherwise every node would download "
            "slices of every shard; choose num_canonical_nodes as a multiple or divisor of the node "
            "count (on a resume, partition_algo='relaxed' with the initial node count lifts this)"
        )


def canonical_rows(
    num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, first_column: int = 0
) -> NDArray[np.int64]:
    """``(C, width)`` positions per canonical node, repeats included, before interleaving.

    CN ``c`` covers ``[c*N//C, (c+1)*N//C)``; a row one short of ``ceil(N/C)`` repeats its last
    position, and when ``P = ratio*C`` each row is padded to a multiple of ``ratio`` with earlier
    positions so the CN splits evenly over its nodes. Only columns from ``first_column`` on are
    returned (a resumed epoch needs no more).
    """
    n, c, p = num_samples, num_canonical_nodes, num_physical_nodes
    per_cn = -(-n // c)
    ratio = p // c if c < p else 0
    pad = (ratio - per_cn % ratio) % ratio if ratio else 0
    width = per_cn + pad

    if not (n > c or (n == c and c >= p)):
        # Fewer samples than canonical nodes: the reference tiles 0..N-1 over the whole grid.
        warnings.warn(
            f"Trying to partition {n} samples over {c} canonical nodes: this repeats many samples (and some "
            "batching methods drop whole batches); check the dataset size or lower "
            "num_canonical_nodes",
            UserWarning,
            stacklevel=4,
        )
        return (np.arange(c * width, dtype=np.int64).reshape(c, width) % n)[:, first_column:]

    built_from = 0 if pad else min(first_column, width)  # the padding copies earlier columns
    cn_ids = np.arange(c, dtype=np.int64)
    starts = cn_ids * n // c
    stops = (cn_ids + 1) * n // c
    rows = starts[:, None] + np.arange(built_from, width, dtype=np.int64)[None, :]
    if per_cn - 1 >= built_from:
        rows[:, per_cn - 1 - built_from] -= stops - starts < per_cn
    if pad:
        # Same (negative, Python-clamped) slice as the reference, so tiny N fails where it fails.
        source = rows[:, -2 * pad - ratio + 1 : -pad - ratio + 1]
        if source.shape[1] != pad:
            raise ConfigurationError(
                f"{n} samples are too few to spread {c} canonical nodes over {p} physical nodes "
                f"({per_cn} per canonical node, {ratio} nodes each); use fewer physical nodes or "
                "more canonical nodes"
            )
        rows[:, -pad:] = source
    return rows[:, first_column - built_from :] if first_column > built_from else rows


def _pad_to_ranks(node_ids: NDArray[np.int64], ranks_per_node: int) -> NDArray[np.int64]:
    """Extend every node's row to a multiple of R by repeating earlier entries."""
    length = node_ids.shape[1]
    overflow = length % ranks_per_node
    if not overflow:
        return node_ids
    missing = ranks_per_node - overflow
    if ranks_per_node + missing - 1 <= length:
        # The entries that keep each rank's repeat off the samples it already has at the tail.
        extra = node_ids[:, length - ranks_per_node - missing + 1 : length - ranks_per_node + 1]
    else:
        warnings.warn(
            f"Attempting to partition {length} samples per physical node over {ranks_per_node} gpus: this "
            "repeats many samples; check the dataset size",
            UserWarning,
            stacklevel=4,
        )
        reps, rest = divmod(missing, length)
        extra = np.concatenate([np.tile(node_ids, reps), node_ids[:, :rest]], 1)
    return np.concatenate([node_ids, extra], 1)


def partition_orig(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """Interleave the canonical nodes, drop the resumed prefix, deal out to nodes, ranks, workers.

    ``initial_physical_nodes`` is ignored (``orig`` always lays out for the current world).
    """
    p, r, w, b = num_physical_nodes, ranks_per_node, workers_per_rank, batch_size
    _require_compatible(num_canonical_nodes, p)
    if drop_first % p:
        logger.warning("drop_first=%d is not a multiple of %d physical nodes; rounding it down", drop_first, p)
        drop_first -= drop_first % p

    # Column-major: CN 0, CN 1, ... at each depth. Only the sequence is kept: at 100M samples
    # every N-sized array alive at once costs 800 MB.
    skipped_columns = drop_first // num_canonical_nodes
    rows = canonical_rows(num_samples, num_canonical_nodes, p, skipped_columns)
    sequence = rows.T.ravel()[drop_first - skipped_columns * num_canonical_nodes :]
    del rows
    node_ids = _pad_to_ranks(sequence.reshape(-1, p).T, r)  # node q takes every P-th entry
    del sequence

    per_rank = node_ids.shape[1] // r
    per_worker_round = w * b
    padded = math.ceil(per_rank / per_worker_round) * per_worker_round
    # (P, per_rank, R): rank r takes every R-th entry of its node's row.
    rank_ids = np.empty((p, padded, r), np.int64)
    rank_ids[:, :per_rank, :] = node_ids.reshape(p, per_rank, r)
    rank_ids[:, per_rank:, :] = -1
    del node_ids
    # Chunk j of B entries of a rank goes to worker j % W as its batch j // W.
    work = rank_ids.transpose(0, 2, 1).reshape(p, r, padded // per_worker_round, w, b)
    return work.transpose(0, 1, 3, 2, 4)  # a view, as the reference returns; copying costs ~N


def leading_rounds(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    drop_first: int,
    rounds: int,
) -> NDArray[np.int64] | None:
    """``partition_orig(...)[:, :, :, :rounds]`` without building the rest, or ``None`` if they reach the end.

    The first ``rounds`` batches of every worker are the first ``P*R*W*B*rounds`` entries of the
    interleaved sequence: entry ``q + P*(k + R*(s + B*(w + W*t)))`` is node ``q``, rank ``k``, worker
    ``w``, batch ``t``, slot ``s``. Only columns before each canonical row's last one are plain
    positions (repeats and node padding sit at the end), so a head that reaches them is refused.
    """
    p, r, w, b, c = num_physical_nodes, ranks_per_node, workers_per_rank, batch_size, num_canonical_nodes
    _require_compatible(c, p)
    drop_first -= drop_first % p
    if num_samples <= c:
        return None
    skipped_columns, offset = divmod(drop_first, c)
    need = p * r * w * b * rounds
    columns = -(-(offset + need) // c)
    if skipped_columns + columns > -(-num_samples // c) - 1:
        return None
    starts = np.arange(c, dtype=np.int64) * num_samples // c
    rows = starts[:, None] + np.arange(skipped_columns, skipped_columns + columns, dtype=np.int64)[None, :]
    sequence = rows.T.ravel()[offset : offset + need]
    return sequence.reshape(rounds, w, b, r, p).transpose(4, 3, 1, 0, 2)


def partition_relaxed(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """``orig``, unless resuming (``initial_physical_nodes`` set) onto a node count ``orig`` refuses.

    Then the initial world's layout is rebuilt with the same global batch and its exact traversal
    order is re-cut for the current world (which assumes ranks per node did not change).
    """
    p, r, w, b = num_physical_nodes, ranks_per_node, workers_per_rank, batch_size
    if initial_physical_nodes is None or nodes_compatible(num_canonical_nodes, p):
        return partition_orig(num_samples, num_canonical_nodes, p, r, w, b, drop_first)
    global_batch = p * r * b
    initial_devices = initial_physical_nodes * r
    if global_batch % initial_devices:
        raise ConfigurationError(
            f"a global batch size of {global_batch} ({p} nodes x {r} ranks x batch_size {b}) is not "
            f"evenly divisible by the initial {initial_devices} devices ({initial_physical_nodes} "
            "nodes); keep the global batch size unchanged when resuming with partition_algo='relaxed'"
        )
    initial = partition_orig(
        num_samples, num_canonical_nodes, initial_physical_nodes, r, w, global_batch // initial_devices, drop_first
    )
    work = traversal_order(initial).reshape(-1, w, p, r, b)
    return work.transpose(2, 3, 1, 0, 4)


PARTITION_FUNCTIONS: dict[str, PartitionFn] = {"orig": partition_orig, "relaxed": partition_relaxed}
PARTITION_ALGOS: tuple[str, ...] = tuple(PARTITION_FUNCTIONS)


def get_partitions(
    algo: str,
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """Epoch positions per (node, rank, worker, batch, slot), identical to Mosaic Streaming 0.13.

    Args:
        algo: one of ``PARTITION_ALGOS`` (``relaxed`` is the dataset's default).
        num_samples: ``N``, the epoch size.
        num_canonical_nodes: ``C``.
        num_physical_nodes: ``P``, the nodes of the world.
        ranks_per_node: ``R``, the ranks on each node.
        workers_per_rank: ``W``, the DataLoader workers of each rank.
        batch_size: ``B``, the per-device batch size (the DataLoader must use the same).
        drop_first: samples of the epoch already consumed (resumption); dropped from the front.
        initial_physical_nodes: ``P`` of the run's first epoch, for ``relaxed`` resumption.

    Returns:
        int64 array of shape ``(P, R, W, batches_per_worker, B)``; ``-1`` marks padding. It is a
        transposed view (not C-contiguous), as in the reference; ``traversal_order`` or
        ``np.ascontiguousarray`` give a flat or contiguous copy when one is needed.

    Raises:
        ConfigurationError: unknown algorithm, invalid sizes, or a world the reference refuses.
    """
    partition = _partition_function(algo)
    num_samples = as_int("num_samples", num_samples, 0)
    if num_samples == 0:
        raise ConfigurationError("an epoch of 0 samples cannot be partitioned; check the streams' sizes and weights")
    num_canonical_nodes = as_int("num_canonical_nodes", num_canonical_nodes, 1)
    num_physical_nodes = as_int("num_physical_nodes", num_physical_nodes, 1)
    ranks_per_node = as_int("ranks_per_node", ranks_per_node, 1)
    workers_per_rank = as_int("workers_per_rank", workers_per_rank, 1)
    batch_size = as_int("batch_size", batch_size, 1)
    drop_first = as_int("drop_first", drop_first, 0)
    if initial_physical_nodes is not None:
        initial_physical_nodes = as_int("initial_physical_nodes", initial_physical_nodes, 1)
    _check_resume_point(drop_first, num_samples, num_physical_nodes * ranks_per_node)
    return partition(
        num_samples,
        num_canonical_nodes,
        num_physical_nodes,
        ranks_per_node,
        workers_per_rank,
        batch_size,
        drop_first,
        initial_physical_nodes,
    )


def _partition_function(algo: str) -> PartitionFn:
    """The function behind ``partition_algo`` ``algo``, or a ``ConfigurationError`` listing the known ones."""
    try:
        return PARTITION_FUNCTIONS[algo]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        raise ConfigurationError(
            f"unknown partition_algo {algo!r}; expected one of {', '.join(PARTITION_ALGOS)}"
        ) from None


def _check_resume_point(drop_first: int, num_samples: int, world_size: int) -> None:
    """Refuse resuming past the epoch's end, padding included: the state is another dataset's or world's.

    The reference allows resuming into the world-size padding at the end of the epoch (a full
    extra world when N divides evenly), so resuming exactly at the end works.
    """
    limit = num_samples + world_size - num_samples % world_size
    if drop_first > limit:
        raise ConfigurationError(
            f"Resuming further into the dataset ({drop_first}) than it has samples ({num_samples}): "
            f"at most {limit} with padding for {world_size} devices; the resume "
            "state does not belong to this dataset or world"
        )
