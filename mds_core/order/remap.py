"""Mapping an epoch's positions through a permutation or a table, keeping ``-1`` padding, without N-sized temporaries.

Also, for a resumed epoch, where each canonical node's reading starts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

_REMAP_CHUNK = 1 << 20


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


def read_span_per_node(
    positions: NDArray[np.int64], num_samples: int, num_canonical_nodes: int
) -> tuple[list[int], list[int]]:
    """Per CN, the offsets within it of the first position ``positions`` reads and of one past the last.

    For a few positions (an epoch's first batches): they are sorted. A CN it does not read gets an
    empty span.
    """
    read = np.sort(positions[positions >= 0], axis=None)
    starts, stops = [], []
    for cn in range(num_canonical_nodes):
        lo, hi = num_samples * cn // num_canonical_nodes, num_samples * (cn + 1) // num_canonical_nodes
        first, last = np.searchsorted(read, [lo, hi]).tolist()
        starts.append(int(read[first]) - lo if last > first else 0)
        stops.append(int(read[last - 1]) - lo + 1 if last > first else 0)
    return starts, stops


def take_keeping_padding(table: NDArray[np.int64], positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """``table[positions]`` where positions are ``>= 0``; ``-1`` padding stays ``-1``."""
    out = table[positions]  # a -1 reads the last entry, which is overwritten just below
    out[positions < 0] = -1
    return out


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
        chunk = flat[start : start + _REMAP_CHUNK]
        padding = chunk < 0
        chunk[...] = table[chunk]
        chunk[padding] = -1
    return positions
