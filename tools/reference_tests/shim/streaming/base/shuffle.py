"""``streaming.base.shuffle``: ``get_shuffle`` and the reference's one function per algorithm."""

from __future__ import annotations

from functools import partial

from mds_core.order import get_shuffle

__all__ = ["get_shuffle", "get_shuffle_naive", "get_shuffle_py1b", "get_shuffle_py1br", "get_shuffle_py1e"]
__all__ += ["get_shuffle_py1s", "get_shuffle_py2s"]

get_shuffle_naive = partial(get_shuffle, "naive")
get_shuffle_py1b = partial(get_shuffle, "py1b")
get_shuffle_py1br = partial(get_shuffle, "py1br")
get_shuffle_py1e = partial(get_shuffle, "py1e")
get_shuffle_py1s = partial(get_shuffle, "py1s")
get_shuffle_py2s = partial(get_shuffle, "py2s")
