"""Shuffles: the permutation of an epoch's sample positions, bit-exact with Mosaic Streaming.

``algorithms`` holds the registry and the simple shuffles, ``py1e`` (the default) and its key
sorting live in their own modules, ``fisher_yates`` (with its optional C half, ``_fisher_yates.c``)
does every unit's Fisher-Yates with numpy's exact draws, and ``spans`` the steps all CN-aware
shuffles share.
"""

from mds_core.order.shuffle.algorithms import SHUFFLE_ALGOS, get_shuffle

__all__ = ["SHUFFLE_ALGOS", "get_shuffle"]
