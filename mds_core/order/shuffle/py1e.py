"""The py1e shuffle (the dataset's default), bit-exact with Mosaic Streaming, and its resumed form.

Per canonical node (CN) the reference shuffles every unit's samples (all units first), then per
unit draws a window width and one uniform shift per sample, and orders the CN's samples by
position + shift (``docs/ordering.md``, "Shuffles").

A resumed epoch reads only the positions after the resumption point, and an epoch's first batches
only a window of positions after it. For those it needs the order of the window's keys only (a
partition and a sort of the window) and the real shuffles of only the units that reach the window;
the other units' shuffles are replayed on the generator just to keep its draws in step, which costs
a fraction of shuffling them.
"""

from __future__ import annotations

import functools
import queue
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.shuffle.fisher_yates import UnitShuffler, ids_dtype, shuffled_ranges, skip_shuffles
from mds_core.order.shuffle.keysort import sort_packed_tail
from mds_core.order.shuffle.py1e_keys import PackedKeys
from mds_core.order.shuffle.spans import block_bounds, prologue

_GATHER_CHUNK = 1 << 20  # elements per step of the final gather, so no N-sized temporary is made


def shuffle_py1e(
    sizes: NDArray[np.int64],
    num_canonical_nodes: int,
    seed: int,
    epoch: int,
    block_size: int,
    starts: Sequence[int] | None = None,
    stops: Sequence[int] | None = None,
) -> NDArray[np.int64]:
    """Prologue, then spread each span's samples uniformly over a window of about ``block_size``.

    With ``starts`` and ``stops``, only positions ``starts[c] .. stops[c] - 1`` (counted from CN
    ``c``'s first position) are computed; the others hold arbitrary values. The generators are
    advanced as by a full shuffle, so the computed positions are exactly the full shuffle's.
    """
    lo_size, hi_size = block_bounds(block_size)
    if lo_size >= hi_size:
        # The reference fails in integers(lo, hi) at the first unit (every CN has one, or the
        # empty-CN error comes first); say why instead of numpy's "low >= high".
        raise ConfigurationError(
            f"shuffle_block_size={block_size} is too small for the py1e shuffle: it needs at least 1"
        )
    (begins, ends), groups, epoch_rng = prologue(sizes, num_canonical_nodes, seed, epoch)
    ids = np.empty(int(sizes.sum()), np.int64)
    starts = [0] * num_canonical_nodes if starts is None else list(starts)
    stops = [len(ids)] * num_canonical_nodes if stops is None else list(stops)
    with UnitShuffler() as shuffler:
        node = _CanonicalNodes(ids, num_canonical_nodes, epoch_rng, lo_size, hi_size, shuffler)
        for cn, (g0, g1) in enumerate(groups):
            node.order(cn, begins[g0:g1], ends[g0:g1], starts[cn], stops[cn])
    if node.block_smaller_than_unit:
        warnings.warn(
            f"Shuffle block size was smaller than shard size for some shards: shuffle_block_size={block_size} "
            "is smaller than some shuffle units (shard parts), so "
            "those units are not mixed with their neighbours by the py1e shuffle; set a larger "
            "shuffle_block_size for a better shuffle",
            UserWarning,
            stacklevel=2,  # get_shuffle's line, whoever asks: an epoch's head and its whole order warn once
        )
    return ids


class _CanonicalNodes:
    """py1e's per-CN work, CN after CN, into ``ids``."""

    def __init__(
        self,
        ids: NDArray[np.int64],
        num_canonical_nodes: int,
        rng: np.random.Generator,
        lo_size: int,
        hi_size: int,
        shuffler: UnitShuffler,
    ) -> None:
        self.ids, self.num_canonical_nodes = ids, num_canonical_nodes
        self.rng, self.lo_size, self.hi_size, self.shuffler = rng, lo_size, hi_size, shuffler
        self.dtype = ids_dtype(len(ids))  # the ids are 0..len-1
        self.offset = 0  # first position of the next CN
        self.block_smaller_than_unit = False

    def order(self, cn: int, begins: NDArray[np.int64], ends: NDArray[np.int64], first: int, stop: int) -> None:
        """Fill positions ``first .. stop - 1`` of CN ``cn``, whose units are ``begins..ends`` in order."""
        lengths = ends - begins
        cn_size = int(lengths.sum())
        if cn_size == 0:
            self._refuse_empty(cn)
        stop = min(stop, cn_size)
        first = min(first, stop)
        whole = first == 0 and stop == cn_size
        if whole:
            # The units' shuffles run on threads while the keys are drawn and sorted.
            values = shuffled_ranges(begins, ends, self.rng, self.shuffler, self.dtype)
            states = []
        else:
            values = np.empty(cn_size, self.dtype)  # only the units the window reads get filled
            states = skip_shuffles(lengths, self.rng)
        # Only samples near the window can hold its keys (each key is its index moved by < hi_size / 2).
        margin = cn_size if whole else self.hi_size + 2
        near = range(max(0, first - margin), min(cn_size, stop + margin))
        keys = PackedKeys(cn_size)
        keys.draw(self.rng, lengths, self.lo_size, self.hi_size, within=near)
        self.block_smaller_than_unit |= keys.block_smaller_than_unit

        cuts: list[tuple[int, int]] = []

        def shuffle_units_reaching(lowest: int, highest: int) -> None:
            # Starts the real shuffles of the units the window reads, on threads, while it is sorted.
            cuts.append((lowest, highest))
            # (called before ``del keys`` below frees the keys; ruff cannot see that order)
            for unit in keys.units_reaching(lowest, highest):  # noqa: F821
                begin, length = keys.units[unit].offset, keys.units[unit].size  # noqa: F821
                self.shuffler.shuffle_range_from(values[begin : begin + length], int(begins[unit]), states[unit])

        on_cut = None if whole else shuffle_units_reaching
        order = sort_packed_tail(
            keys.packed[near.start : near.stop],
            first - near.start,
            keys.index_bits,
            keys.keys_at,
            on_cut,
            stop - near.start,
        )
        if order is not None and cuts and not keys.window_within(near, *cuts[-1], self.hi_size / 2):
            # Never seen; ranks within ``near`` are the CN's only if nothing outside it falls between.
            self.shuffler.wait()
            keys.draw_again()
            order = sort_packed_tail(keys.packed, first, keys.index_bits, keys.keys_at, on_cut, stop)
        started = bool(cuts)
        if order is None:  # exact ties: numpy's own argsort decides, as in the reference
            all_keys = keys.all_keys()
            order = np.argsort(all_keys)[first:stop]
            if not whole and not started and len(order):  # the window's keys are known by now if announced
                low, high = (_packed_value(all_keys[order[i]], keys.index_bits) for i in (0, -1))
                shuffle_units_reaching(low, high)
            del all_keys
        del keys
        self.shuffler.wait()
        _gather(values, order, self.ids[self.offset + first : self.offset + stop], self.shuffler)
        self.offset += cn_size

    def _refuse_empty(self, cn: int) -> None:
        count = self.num_canonical_nodes
        raise ConfigurationError(
            f"The number of samples assigned to a canonical node is 0: canonical node {cn} of {count} would "
            f"get no samples; the epoch has {len(self.ids)} "
            f"samples, fewer than num_canonical_nodes={count} (or this stream's share is that small); "
            "check the dataset's index.json or lower num_canonical_nodes"
        )


def _packed_value(scaled_key: float, index_bits: int) -> int:
    return int(scaled_key) << index_bits


def _gather(
    table: NDArray[np.integer], index: NDArray[np.int64], out: NDArray[np.int64], shuffler: UnitShuffler
) -> None:
    """``out[:] = table[index]`` in chunks on the shuffler's threads (numpy releases the GIL).

    Random reads overlap their cache misses better from several cores. Each chunk goes through a
    buffer made here, on the calling thread: a chunk-sized temporary made on a worker thread comes
    from that thread's malloc arena, whose top glibc keeps after the threads end (8 MiB in the
    process that ordered 10**8 samples, for the rest of the run). ``np.take`` wants its ``out`` in
    the table's dtype, hence the buffer and the widening copy.
    """
    buffers: queue.SimpleQueue[NDArray[np.integer]] = queue.SimpleQueue()
    for _ in range(shuffler.threads):
        buffers.put(np.empty(min(_GATHER_CHUNK, len(index)), table.dtype))

    def gather(start: int) -> None:
        stop = min(start + _GATHER_CHUNK, len(index))
        buffer = buffers.get()
        try:
            # "clip" takes in place: the index holds positions of the table ("raise" would copy out first).
            np.take(table, index[start:stop], out=buffer[: stop - start], mode="clip")
            out[start:stop] = buffer[: stop - start]
        finally:
            buffers.put(buffer)

    for start in range(0, len(index), _GATHER_CHUNK):
        shuffler.run(functools.partial(gather, start))
    shuffler.wait()
