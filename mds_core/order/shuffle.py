"""Shuffle algorithms: the permutation of an epoch's sample positions, bit-exact with Mosaic Streaming.

``get_shuffle(algo, shard_sizes, num_canonical_nodes, seed, epoch, block_size)`` returns an int64
permutation ``perm`` of ``0..N-1`` (``N = sum(shard_sizes)``); position ``i`` of the epoch then
reads big id ``perm[i]``. ``shard_sizes`` are the *shuffle units* produced by resampling, not raw
shard sizes (``shared/spec/ordering.md`` §2).

Every algorithm but ``naive`` keeps the canonical-node (CN) boundaries: output positions
``[c*N//C, (c+1)*N//C)`` hold only samples of the units assigned to CN ``c``, and that assignment
is the same in every epoch, which is what lets a node download only its own shards.

Reproducing the reference's order means reproducing the exact sequence of calls on each
``numpy.random.default_rng`` generator: which generator, which method, on how many elements, in
which order. Everything that does not touch a generator is vectorised; the loops that remain are
over units or blocks and exist only because the reference draws once per unit or block.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided
from numpy.typing import ArrayLike, NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.checks import as_int
from mds_core.order.keysort import argsort_keys

Spans = tuple[NDArray[np.int64], NDArray[np.int64]]  # (begins, ends), end exclusive
Groups = list[tuple[int, int]]  # per CN: [first span, last span) into Spans
ShuffleFn = Callable[[NDArray[np.int64], int, int, int, int], NDArray[np.int64]]

# --------------------------------------------------------------------------------------------
# Shared pieces


def concat_ranges(begins: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(b, e) for b, e in zip(begins, ends)])`` without a Python loop.

    Fill with ones, put at each span's first position the jump from the previous span's last id,
    and take the running sum in place: two passes over the output, no N-sized temporaries.
    """
    lengths = ends - begins
    nonempty = lengths > 0
    begins, ends, lengths = begins[nonempty], ends[nonempty], lengths[nonempty]
    out = np.ones(int(lengths.sum()), np.int64)
    if out.size == 0:
        return out
    offsets = np.cumsum(lengths) - lengths
    out[0] = begins[0]
    out[offsets[1:]] = begins[1:] - ends[:-1] + 1
    np.cumsum(out, out=out)
    return out


def unit_spans(sizes: NDArray[np.int64]) -> Spans:
    """Contiguous id range of each unit, in input order."""
    ends = np.cumsum(sizes, dtype=np.int64)
    return ends - sizes, ends


def run_order(spans: Spans, seed: int) -> Spans:
    """Order the units with ``RNG(seed)``: the "run" order, the same in every epoch.

    The reference shuffles a list of span tuples; shuffling an index array of the same length
    draws the same numbers (Fisher-Yates over the same ``n``), so the order is identical.
    """
    order = np.arange(len(spans[0]), dtype=np.int64)
    np.random.default_rng(seed).shuffle(order)
    return spans[0][order], spans[1][order]


def cut_at_cn_boundaries(spans: Spans, num_samples: int, num_canonical_nodes: int) -> tuple[Spans, Groups]:
    """Cut the spans (in their current order) at the CN boundaries ``N*(c+1)//C``.

    A span that straddles a boundary gives its head to the earlier CN and its tail stays queued for
    the next. Empty spans go to the CN that is being filled when they are reached. These are the
    same boundaries the partitioner uses, which is what keeps shuffle and partition aligned.
    """
    begins = spans[0].tolist()
    ends = spans[1].tolist()
    out_begins: list[int] = []
    out_ends: list[int] = []
    groups: Groups = []
    i, filled = 0, 0
    for cn in range(num_canonical_nodes):
        bound = num_samples * (cn + 1) // num_canonical_nodes
        first = len(out_begins)
        while i < len(begins):
            b, e = begins[i], ends[i]
            if filled + (e - b) > bound:
                if filled < bound:
                    k = bound - filled
                    out_begins.append(b)
                    out_ends.append(b + k)
                    begins[i] = b + k
                    filled += k
                break
            out_begins.append(b)
            out_ends.append(e)
            i += 1
            filled += e - b
        groups.append((first, len(out_begins)))
    cut = (np.array(out_begins, np.int64), np.array(out_ends, np.int64))
    return cut, groups


def shuffle_within_groups(spans: Spans, groups: Groups, rng: np.random.Generator) -> Spans:
    """Shuffle the span order inside each CN with ``rng``, CN by CN (one ``shuffle`` call each)."""
    order = np.arange(len(spans[0]), dtype=np.int64)
    for g0, g1 in groups:
        rng.shuffle(order[g0:g1])  # in place on the view
    return spans[0][order], spans[1][order]


def prologue(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int
) -> tuple[Spans, Groups, np.random.Generator]:
    """Common start of py1s, py1br and py1e: run order, CN cut, per-epoch order inside each CN.

    Returns the final spans, the CN groups and the epoch generator, which the caller keeps using.
    """
    num_samples = int(sizes.sum())
    spans = run_order(unit_spans(sizes), seed)
    spans, groups = cut_at_cn_boundaries(spans, num_samples, num_canonical_nodes)
    epoch_rng = np.random.default_rng(seed + epoch)
    spans = shuffle_within_groups(spans, groups, epoch_rng)
    return spans, groups, epoch_rng


# Units at least this long are shuffled on a worker thread (a big Fisher-Yates is bound by cache
# misses, ~75 ns per element here, against ~15 ns for drawing its random numbers alone).
_OFFLOAD_MIN = 1 << 16


class UnitShuffler:
    """Shuffles slices exactly as ``rng.shuffle`` one after another would, big ones in parallel.

    numpy's Fisher-Yates draws ``random_interval(i)`` for ``i = n-1 .. 1`` whatever the array holds,
    so shuffling a stride-0 view (one byte seen ``n`` times, never a cache miss) advances the
    generator exactly as the real shuffle would. The caller's generator does that in order, while a
    copy of it taken just before runs the real shuffle of that slice on a thread. numpy releases the
    GIL while shuffling, so big units use every core and the generator is free for the next draws.
    """

    def __init__(self, workers: int | None = None) -> None:
        workers = workers if workers is not None else min(8, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="mds-shuffle") if workers > 1 else None
        self._pending: list[Future[None]] = []

    def shuffle(self, piece: NDArray[np.int64], rng: np.random.Generator) -> None:
        """``rng.shuffle(piece)``; the result is ready after ``wait()``."""
        if self._pool is None or len(piece) < _OFFLOAD_MIN:
            rng.shuffle(piece)
            return
        twin = np.random.Generator(type(rng.bit_generator)())
        twin.bit_generator.state = rng.bit_generator.state
        self._pending.append(self._pool.submit(twin.shuffle, piece))
        rng.shuffle(as_strided(np.zeros(1, np.int8), shape=(len(piece),), strides=(0,)))

    def wait(self) -> None:
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        self.wait()
        if self._pool is not None:
            self._pool.shutdown()

    def __enter__(self) -> "UnitShuffler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shuffle_slices(ids: NDArray[np.int64], lengths: NDArray[np.int64], rng: np.random.Generator,
                   shuffler: UnitShuffler | None = None) -> None:
    """Shuffle consecutive slices of ``ids`` of the given lengths, one ``rng.shuffle`` call each.

    With a ``shuffler`` big slices may still be in progress on return (``shuffler.wait()``).
    """
    offset = 0
    for length in lengths.tolist():
        piece = ids[offset : offset + length]
        if shuffler is None:
            rng.shuffle(piece)
        else:
            shuffler.shuffle(piece, rng)
        offset += length


_CHUNK = 1 << 16  # elements filled at a time, so each span is shuffled while still in cache


def shuffled_ranges(begins: NDArray[np.int64], ends: NDArray[np.int64], rng: np.random.Generator,
                    shuffler: UnitShuffler | None = None) -> NDArray[np.int64]:
    """``concat_ranges`` with each span shuffled by ``rng``, span by span in order.

    With a ``shuffler`` the big spans may still be shuffling on return (``shuffler.wait()``).
    """
    lengths = ends - begins
    ids = np.empty(int(lengths.sum()), np.int64)
    stops = np.cumsum(lengths)
    first, offset = 0, 0
    while first < len(lengths):
        # Spans [first, last) fill about one chunk (at least one span).
        last = max(int(np.searchsorted(stops, offset + _CHUNK, side="right")), first + 1)
        stop = int(stops[last - 1])
        chunk = ids[offset:stop]
        chunk[:] = concat_ranges(begins[first:last], ends[first:last])
        shuffle_slices(chunk, lengths[first:last], rng, shuffler)
        first, offset = last, stop
    return ids


def block_bounds(block_size: int) -> tuple[int, int]:
    """The ``[lo, hi)`` range of the randomised block size, computed as the reference does."""
    return int(0.75 * block_size), int(1.25 * block_size)


# --------------------------------------------------------------------------------------------
# Algorithms


def shuffle_naive(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """One global permutation from ``RNG(seed + epoch)``; ignores CNs and the block size."""
    return np.random.default_rng(seed + epoch).permutation(int(sizes.sum())).astype(np.int64, copy=False)


def shuffle_py1s(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """Prologue, then shuffle inside each span; spans never mix."""
    (begins, ends), _, epoch_rng = prologue(sizes, num_canonical_nodes, seed, epoch)
    with UnitShuffler() as shuffler:
        return shuffled_ranges(begins, ends, epoch_rng, shuffler)


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
    ids = concat_ranges(begins, ends)
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
            epoch_rng.shuffle(ids[lo:hi])
        cn_start = cn_stop
    return ids


def shuffle_py1e(
    sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int, block_size: int
) -> NDArray[np.int64]:
    """Prologue, then spread each span's samples uniformly over a window of about ``block_size``.

    Per CN: shuffle every span's samples (all spans first), then per span draw a window width and
    one uniform shift per sample, and order the CN's samples by position + shift.
    """
    lo_size, hi_size = block_bounds(block_size)
    if lo_size >= hi_size:
        # The reference fails in integers(lo, hi) at the first unit (every CN has one, or the
        # empty-CN error comes first); say why instead of numpy's "low >= high".
        raise ConfigurationError(
            f"shuffle_block_size={block_size} is too small for the py1e shuffle: it needs at least 1"
        )
    (begins, ends), groups, epoch_rng = prologue(sizes, num_canonical_nodes, seed, epoch)
    num_samples = int(sizes.sum())
    ids = np.empty(num_samples, np.int64)
    with UnitShuffler() as shuffler:
        block_smaller_than_unit = _py1e_canonical_nodes(ids, begins, ends, groups, epoch_rng, lo_size, hi_size,
                                                        shuffler)
    if block_smaller_than_unit:
        warnings.warn(
            f"shuffle_block_size={block_size} is smaller than some shuffle units (shard parts), so "
            "those units are not mixed with their neighbours by the py1e shuffle; set a larger "
            "shuffle_block_size for a better shuffle",
            UserWarning,
            stacklevel=3,
        )
    return ids


def _py1e_canonical_nodes(ids: NDArray[np.int64], begins: NDArray[np.int64], ends: NDArray[np.int64], groups: Groups,
                          epoch_rng: np.random.Generator, lo_size: int, hi_size: int, shuffler: UnitShuffler) -> bool:
    """py1e's per-CN work into ``ids``; returns whether some unit was wider than its block."""
    num_samples, num_canonical_nodes = len(ids), len(groups)
    offset = 0
    block_smaller_than_unit = False
    for cn, (g0, g1) in enumerate(groups):
        cn_lengths = ends[g0:g1] - begins[g0:g1]
        cn_size = int(cn_lengths.sum())
        if cn_size == 0:
            raise ConfigurationError(
                f"canonical node {cn} of {num_canonical_nodes} would get no samples: the epoch has "
                f"{num_samples} samples, fewer than num_canonical_nodes={num_canonical_nodes} (or "
                "this stream's share is that small); check the dataset's index.json or lower "
                "num_canonical_nodes"
            )
        # The units' shuffles run on threads while the keys are drawn and sorted.
        values = shuffled_ranges(begins[g0:g1], ends[g0:g1], epoch_rng, shuffler)
        keys = np.arange(cn_size, dtype=np.float64)
        unit_offset = 0
        for unit_size in cn_lengths.tolist():
            width = int(epoch_rng.integers(lo_size, hi_size))
            reach = (width - unit_size) / 2
            if reach < 0:
                reach = 0.0
                block_smaller_than_unit = True
            low = max(-reach, -unit_offset)
            high = min(reach, cn_size - unit_offset - unit_size)
            # A draw of size 0 consumes nothing, as in the reference; the integers() above still counts.
            keys[unit_offset : unit_offset + unit_size] += epoch_rng.uniform(low, high, unit_size)
            unit_offset += unit_size
        # The reference's np.argsort, faster; equal keys (probability ~0) may differ in order.
        order = argsort_keys(keys, overwrite=True)
        del keys
        shuffler.wait()
        np.take(values, order, out=ids[offset : offset + cn_size])
        offset += cn_size
    return block_smaller_than_unit


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
) -> NDArray[np.int64]:
    """The epoch's permutation of sample positions, identical to Mosaic Streaming 0.13's.

    Args:
        algo: one of ``SHUFFLE_ALGOS`` (``py1e`` is the dataset's default).
        shard_sizes: sizes of the shuffle units, in order (resampled shard repeats).
        num_canonical_nodes: ``C``; CN boundaries are ``N*(c+1)//C``.
        seed: the run's ``shuffle_seed`` (``>= 0``).
        epoch: the epoch (``>= 0``); the per-epoch generator is seeded with ``seed + epoch``.
        block_size: ``shuffle_block_size``; used by ``py1br`` and ``py1e`` only.

    Returns:
        int64 array, a permutation of ``0..sum(shard_sizes)-1``.

    Raises:
        ConfigurationError: unknown algorithm, invalid arguments, or a configuration the reference
            refuses (``py1br`` with ``block_size <= 1``, ``py1e`` with an empty canonical node).
    """
    try:
        shuffle = SHUFFLE_FUNCTIONS[algo]
    except (KeyError, TypeError):
        raise ConfigurationError(
            f"unknown shuffle_algo {algo!r}; expected one of {', '.join(SHUFFLE_ALGOS)}"
        ) from None
    sizes = _as_sizes(shard_sizes)
    num_canonical_nodes = as_int("num_canonical_nodes", num_canonical_nodes, 1)
    seed = as_int("shuffle_seed", seed, 0)
    epoch = as_int("epoch", epoch, 0)
    # Only py1br and py1e use the block size, and they check it themselves: the reference accepts
    # any value (per-stream batching can pass 0) for the others.
    block_size = as_int("shuffle_block_size", block_size, None)
    return shuffle(sizes, num_canonical_nodes, seed, epoch, block_size)
