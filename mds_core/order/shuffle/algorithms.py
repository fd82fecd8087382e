"""Shuffle algorithms: the permutation of an epoch's sample positions, bit-exact with Mosaic Streaming.

``get_shuffle(algo, shard_sizes, num_canonical_nodes, seed, epoch, block_size)`` returns an int64
permutation ``perm`` of ``0..N-1`` (``N = sum(shard_sizes)``); position ``i`` of the epoch then
reads big id ``perm[i]``. ``shard_sizes`` are the *shuffle units* produced by resampling, not raw
shard sizes (``docs/ordering.md``, "Shuffles").

Every algorithm but ``naive`` keeps the canonical-node (CN) boundaries: output positions
``[c*N//C, (c+1)*N//C)`` hold only samples of the units assigned to CN ``c``, and that assignment
is the same in every epoch, which is what lets a node download only its own shards.

Reproducing the reference's order means reproducing the exact sequence of calls on each
``numpy.random.default_rng`` generator: which generator, which method, on how many elements, in
which order. Everything that does not touch a generator is vectorised; the loops that remain are
over units or blocks and exist only because the reference draws once per unit or block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int
from mds_core.order.shuffle.fisher_yates import (
    UnitShuffler,
    ids_dtype,
    shuffle_in_place,
    shuffle_slices,
    shuffled_ranges,
)
from mds_core.order.shuffle.py1e import shuffle_py1e
from mds_core.order.shuffle.spans import block_bounds, concat_ranges, cut_at_cn_boundaries, prologue, unit_spans

ShuffleFn = Callable[[NDArray[np.int64], int, int, int, int], NDArray[np.int64]]


# --------------------------------------------------------------------------------------------
# Algorithms


def shuffle_naive(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """One global permutation from ``RNG(seed + epoch)``; ignores CNs and the block size."""
    # Generator.permutation(n) is shuffle(arange(n)).
    ids = np.arange(int(sizes.sum()), dtype=np.int64)
    shuffle_in_place(np.random.default_rng(seed + epoch), ids)
    return ids


def shuffle_py1s(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """Prologue, then shuffle inside each span; spans never mix."""
    (begins, ends), _, epoch_rng = prologue(sizes, num_canonical_nodes, seed, epoch)
    with UnitShuffler() as shuffler:
        ids = shuffled_ranges(begins, ends, epoch_rng, shuffler, ids_dtype(int(sizes.sum())))
    return ids.astype(np.int64, copy=False)


def shuffle_py2s(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """Shuffle units and their samples once with ``RNG(seed)``, cut at CNs, then again per epoch.

    Unlike the prologue, units are shuffled *before* the cut, so a unit split over two CNs gives a
    random subset to each. The reference holds one array per unit; here all samples sit in one
    array in run order and a "span" is a range of positions in it, so cutting a unit is cutting a
    position range and its head keeps the already-shuffled first ``k`` samples, as in the reference.
    """
    num_samples = int(sizes.sum())
    fixed_rng = np.random.default_rng(seed)
    order = np.arange(len(sizes), dtype=np.int64)
    fixed_rng.shuffle(order)
    begins, ends = unit_spans(sizes)
    samples = shuffled_ranges(begins[order], ends[order], fixed_rng)
    run_sizes = sizes[order]

    positions = unit_spans(run_sizes)
    (pos_begins, pos_ends), groups = cut_at_cn_boundaries(positions, num_samples, num_canonical_nodes)
    epoch_rng = np.random.default_rng(seed + epoch)
    out = np.empty(num_samples, np.int64)
    filled = 0
    for g0, g1 in groups:
        # Per CN the reference shuffles the piece order, then each piece: keep that call order.
        piece_order = np.arange(g0, g1, dtype=np.int64)
        epoch_rng.shuffle(piece_order)
        piece_begins, piece_ends = pos_begins[piece_order], pos_ends[piece_order]
        part = out[filled : filled + int((piece_ends - piece_begins).sum())]
        np.take(samples, concat_ranges(piece_begins, piece_ends), out=part)
        shuffle_slices(part, piece_ends - piece_begins, epoch_rng)
        filled += len(part)
    return out


def shuffle_py1br(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """Prologue, then shuffle randomly sized, per-CN staggered blocks of about ``block_size``.

    Blocks after the first of a CN overlap their predecessor by the stagger (the reference advances
    by each block's length, not to its end); the overlapping shuffles are kept as they are.
    """
    lo_size, hi_size = block_bounds(block_size)
    if lo_size <= 0:
        raise ConfigurationError(
            f"shuffle_block_size={block_size} is too small for the py1br shuffle: it needs at least 2 "
            "(with per-stream batching the block is scaled by the stream's proportion, so raise it)"
        )
    (begins, ends), groups, epoch_rng = prologue(sizes, num_canonical_nodes, seed, epoch)
    ids = concat_ranges(begins, ends).astype(ids_dtype(int(sizes.sum())), copy=False)
    span_stops = np.concatenate([[0], np.cumsum(ends - begins)]).tolist()
    cn_stops = [span_stops[g1] for _, g1 in groups]
    # One vector draw for all CNs, after the span shuffles and before any block size.
    stagger = epoch_rng.integers(0, lo_size, (num_canonical_nodes,)).tolist()
    cn_start = 0
    for cn, cn_stop in enumerate(cn_stops):
        blocks: list[tuple[int, int]] = []
        cursor = cn_start
        while cursor < cn_stop:
            width = int(epoch_rng.integers(lo_size, hi_size))
            lo = max(cursor - stagger[cn], cn_start)
            hi = min(cursor + width - stagger[cn], cn_stop)
            blocks.append((lo, hi))
            cursor += hi - lo
        # All block sizes of a CN are drawn before any of its blocks is shuffled.
        for lo, hi in blocks:
            shuffle_in_place(epoch_rng, ids[lo:hi])
        cn_start = cn_stop
    return ids.astype(np.int64, copy=False)


SHUFFLE_FUNCTIONS: dict[str, ShuffleFn] = {
    "naive": shuffle_naive,
    "py1br": shuffle_py1br,
    "py1e": shuffle_py1e,
    "py1s": shuffle_py1s,
    "py2s": shuffle_py2s,
}
SHUFFLE_ALGOS: tuple[str, ...] = tuple(SHUFFLE_FUNCTIONS)


# --------------------------------------------------------------------------------------------
# Entry point


def _as_sizes(shard_sizes: ArrayLike) -> NDArray[np.int64]:
    sizes = np.asarray(shard_sizes)
    if sizes.ndim != 1:
        raise ConfigurationError(f"shard_sizes must be a 1-D sequence of unit sizes, got shape {sizes.shape}")
    if sizes.size and not np.issubdtype(sizes.dtype, np.integer):
        raise ConfigurationError(f"shard_sizes must hold integers, got dtype {sizes.dtype}")
    sizes = sizes.astype(np.int64, copy=False)
    if sizes.size and int(sizes.min()) < 0:
        bad = int(np.flatnonzero(sizes < 0)[0])
        raise ConfigurationError(f"shard_sizes[{bad}] is {int(sizes[bad])}; unit sizes cannot be negative")
    return sizes


def get_shuffle(
    algo: str,
    shard_sizes: ArrayLike,
    num_canonical_nodes: int,
    seed: int,
    epoch: int,
    block_size: int = 1 << 18,
    *,
    starts: Sequence[int] | None = None,
    stops: Sequence[int] | None = None,
) -> NDArray[np.int64]:
    """The epoch's permutation of sample positions, identical to Mosaic Streaming 0.13's.

    Args:
        algo: one of ``SHUFFLE_ALGOS`` (``py1e`` is the dataset's default).
        shard_sizes: sizes of the shuffle units, in order (resampled shard repeats).
        num_canonical_nodes: ``C``; CN boundaries are ``N*(c+1)//C``.
        seed: the run's ``shuffle_seed`` (``>= 0``).
        epoch: the epoch (``>= 0``); the per-epoch generator is seeded with ``seed + epoch``.
        block_size: ``shuffle_block_size``; used by ``py1br`` and ``py1e`` only.
        starts: per CN, how many of its leading positions the caller will not read (a resumed
            epoch's). Those may be left unset, which ``py1e`` uses to skip most of the work before
            a resumption point; every other position is exactly as without ``starts``.
        stops: per CN, where the positions the caller will read end (the window of an epoch's first
            batches): with ``py1e``, the positions from there on are left unset too.

    Returns:
        int64 array, a permutation of ``0..sum(shard_sizes)-1``.

    Raises:
        ConfigurationError: unknown algorithm, invalid arguments, or a configuration the reference
            refuses (``py1br`` with ``block_size <= 1``, ``py1e`` with an empty canonical node).
    """
    try:
        shuffle = SHUFFLE_FUNCTIONS[algo]
    except (KeyError, TypeError):
        raise ConfigurationError(f"unknown shuffle_algo {algo!r}; expected one of {', '.join(SHUFFLE_ALGOS)}") from None
    sizes = _as_sizes(shard_sizes)
    num_canonical_nodes = as_int("num_canonical_nodes", num_canonical_nodes, 1)
    seed = as_int("shuffle_seed", seed, 0)
    epoch = as_int("epoch", epoch, 0)
    # Only py1br and py1e use the block size, and they check it themselves: the reference accepts
    # any value (per-stream batching can pass 0) for the others.
    block_size = as_int("shuffle_block_size", block_size, None)
    window: dict[str, list[int] | None] = {}
    if (starts is not None or stops is not None) and shuffle is shuffle_py1e:
        window = {
            "starts": _per_node("starts", starts, num_canonical_nodes),
            "stops": _per_node("stops", stops, num_canonical_nodes),
        }
    # One call for both: py1e's warning names this line, so a head and its whole order warn once.
    return shuffle(sizes, num_canonical_nodes, seed, epoch, block_size, **window)


def _per_node(name: str, values: Sequence[int] | None, num_canonical_nodes: int) -> list[int] | None:
    if values is None:
        return None
    if len(values) != num_canonical_nodes:
        raise ConfigurationError(f"{name} has {len(values)} entries for {num_canonical_nodes} canonical nodes")
    return [as_int(name, value, 0) for value in values]
