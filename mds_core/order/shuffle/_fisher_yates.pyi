"""Types of the optional C extension built from ``_fisher_yates.c`` (see setup.py)."""

from typing import Any

import numpy as np
from numpy.typing import NDArray

def shuffle(capsule: object, array: NDArray[np.integer[Any]], /) -> None:
    """``Generator.shuffle`` of a writable, C-contiguous int32 or int64 array; ``capsule`` is the bit generator's."""

def skip(capsule: object, n: int, /) -> None:
    """Advance a bit generator as a shuffle of ``n`` elements would."""

def pack_uniform_keys(
    capsule: object,
    packed: NDArray[np.uint64],
    first_index: int,
    low: float,
    high: float,
    scale: float,
    index_bits: int,
    /,
) -> int | None:
    """py1e's keys for a run of samples, drawn and packed; the largest fixed-point key, or ``None`` if one is out of range."""

def unpack_sorted_keys(packed: NDArray[np.uint64], index_bits: int, /) -> list[int]:
    """The collision slots of sorted packed keys; every key is reduced to its index in place."""
