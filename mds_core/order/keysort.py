"""An exact, faster ``np.argsort`` for the py1e shuffle's float keys.

numpy has SIMD sorts for plain integer arrays but none for ``argsort`` of float64 on AVX2
machines: at 10M keys ``argsort`` takes ~0.9 s, ``np.sort`` of uint64 ~0.2 s. So each key is
scaled to a fixed-point integer, packed with its index into one uint64, the packed array is
sorted, and the few runs whose fixed-point keys collide are re-sorted by their full keys.
Fixed-point rounding is monotone (``floor`` of an increasing map), so the result is exactly the
order of the keys. Exactly equal keys (a handful of pairs per billion) are the exception: numpy's
unstable argsort puts them in an order only it knows, and the reference's order is that one, so
when there are any the keys are argsorted by numpy after all (on the exactly rescaled keys, whose
comparisons, and so whose argsort, are the same).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

_MIN_FRACTION_BITS = 8  # below this, collisions get common enough that a plain argsort wins
_CHUNK = 1 << 20  # elements per step when adding the indices, so no N-sized temporary is made


def argsort_keys(keys: NDArray[np.float64], overwrite: bool = False) -> NDArray[np.int64]:
    """``np.argsort(keys)`` for finite float keys, exactly, usually several times faster.

    With ``overwrite`` the keys are rescaled in place (exactly, order and ties kept), which saves
    an N-sized copy at the peak of epoch generation.
    """
    n = keys.size
    if n < 2:
        return np.arange(n, dtype=np.int64)
    index_bits = (n - 1).bit_length()
    low = math.floor(float(keys.min()))
    value_bits = math.floor(float(keys.max()) - low).bit_length() + 1
    fraction_bits = 64 - index_bits - value_bits
    if low < 0 or fraction_bits < _MIN_FRACTION_BITS:
        return np.argsort(keys)
    scaled = keys if overwrite else keys.copy()
    # Subtracting an integer below 2**53 and scaling by a power of two are both exact in float64.
    scaled -= low
    scaled *= float(1 << fraction_bits)
    packed = _pack(scaled, index_bits)
    packed.sort()
    order, exact_ties = _resolve_collisions(packed, scaled, index_bits)
    if exact_ties:
        del order, packed
        return np.argsort(scaled)
    return order


def _pack(scaled: NDArray[np.float64], index_bits: int) -> NDArray[np.uint64]:
    """``floor(scaled) << index_bits | index`` per key."""
    # Through int64 (the values stay below 2**63): numpy converts float64 to int64 several times
    # faster than to uint64.
    packed = scaled.astype(np.int64).view(np.uint64)
    packed <<= np.uint64(index_bits)
    for start in range(0, packed.size, _CHUNK):
        chunk = packed[start:start + _CHUNK]
        chunk |= np.arange(start, start + chunk.size, dtype=np.uint64)
    return packed


def _resolve_collisions(packed: NDArray[np.uint64], keys: NDArray[np.float64],
                        index_bits: int) -> tuple[NDArray[np.int64], bool]:
    """The indices of the sorted ``packed``, with runs of equal fixed-point keys ordered by key,
    and whether two keys are exactly equal."""
    # Neighbours share a fixed-point key exactly when their packed values differ only in the
    # index bits.
    same = np.bitwise_xor(packed[1:], packed[:-1])
    same = np.flatnonzero(same < np.uint64(1 << index_bits))
    packed &= np.uint64((1 << index_bits) - 1)
    order = packed.view(np.int64)
    if not same.size:
        return order, False
    # Re-sorting any contiguous stretch of slots by full key is exact, so neighbouring runs may merge.
    slots = np.union1d(same, same + 1)
    run_ids = np.cumsum(np.diff(slots, prepend=slots[0] - 2) != 1)
    members = order[slots]
    members = members[np.lexsort((members, keys[members], run_ids))]
    order[slots] = members
    # Equal keys can only be neighbours inside one run (equal keys share their fixed-point value).
    member_keys = keys[members]
    exact_ties = bool(np.any((member_keys[1:] == member_keys[:-1]) & (run_ids[1:] == run_ids[:-1])))
    return order, exact_ties
