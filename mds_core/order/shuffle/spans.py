"""Spans of sample ids and the steps every CN-aware shuffle starts with (``docs/ordering.md``, "Shuffles").

A unit is a contiguous range of big sample ids; the shuffles order units, cut them at the
canonical-node boundaries and then shuffle inside them. These helpers do that on ``(begins, ends)``
arrays, drawing from the generators exactly as the reference does.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Spans = tuple[NDArray[np.int64], NDArray[np.int64]]  # (begins, ends), end exclusive
Groups = list[tuple[int, int]]  # per CN: [first span, last span) into Spans


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


def block_bounds(block_size: int) -> tuple[int, int]:
    """The ``[lo, hi)`` range of the randomised block size, computed as the reference does."""
    return int(0.75 * block_size), int(1.25 * block_size)
