"""Fisher-Yates shuffles of unit slices, bit-exact with ``Generator.shuffle``, fast.

Two ways to the same result. The C extension ``_fisher_yates`` (built with the package when a C
compiler is there) is numpy's shuffle draw for draw, with the cache misses of its swaps overlapped:
~17 ns per element against numpy's 50-100 once the array outgrows L2. Without it, numpy shuffles.

Either way a shuffle splits in two. numpy's Fisher-Yates draws ``random_interval(i)`` for
``i = n-1 .. 1`` whatever the array holds, so the caller's generator can be advanced by the draws
alone (``skip_shuffle``: in C, or by shuffling a stride-0 view, never a cache miss), while a copy
of the generator taken just before does the real shuffle later or on another thread (the GIL is
released while shuffling). Big units use every core, and a unit whose order turns out not to be
needed (before a resumption point) is never really shuffled at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided
from numpy.typing import NDArray

from mds_core.order.shuffle.spans import concat_ranges


class NativeShuffle(Protocol):
    """The C extension ``_fisher_yates`` (its stub says what each function does)."""

    def shuffle(self, capsule: object, array: NDArray[np.integer[Any]], /) -> None:
        """Shuffle ``array`` in place with the generator in ``capsule``."""

    def skip(self, capsule: object, n: int, /) -> None:
        """Advance the generator in ``capsule`` by ``n`` draws."""

    def pack_uniform_keys(
        self,
        capsule: object,
        packed: NDArray[np.uint64],
        first_index: int,
        low: float,
        high: float,
        scale: float,
        index_bits: int,
        /,
    ) -> int | None:
        """Fill ``packed`` with uniform random keys in ``[low, high)``, each packed with its index."""

    def unpack_sorted_keys(self, packed: NDArray[np.uint64], index_bits: int, /) -> list[int]:
        """The indices packed in the low ``index_bits`` bits of sorted keys."""


def _load_native() -> NativeShuffle | None:
    try:
        from mds_core.order.shuffle import _fisher_yates
    except ImportError:  # built without a C compiler: numpy's shuffle, the same order, slower
        return None
    return _fisher_yates


native = _load_native()

# Units at least this long are shuffled on a worker thread; shorter ones are not worth a hand-off.
_OFFLOAD_MIN = 1 << 16

GeneratorState = Mapping[str, Any]  # ``bit_generator.state``: a snapshot to replay a shuffle from


def ids_dtype(stop: int) -> type[np.signedinteger]:
    """The narrowest of int32/int64 that holds ids below ``stop``.

    A Fisher-Yates over int32 touches half the memory of int64 and runs ~1.8x faster here (it is
    bound by cache misses); the draws are the same whatever the dtype.
    """
    return np.int32 if stop <= np.iinfo(np.int32).max else np.int64


def shuffle_in_place(rng: np.random.Generator, ids: NDArray[np.integer]) -> None:
    """``rng.shuffle(ids)``: the same order and generator state, in C when it is built."""
    if native is not None and _native_can_shuffle(ids):
        with rng.bit_generator.lock:  # numpy's own methods hold it while drawing
            native.shuffle(rng.bit_generator.capsule, ids)
    else:
        rng.shuffle(ids)


def _native_can_shuffle(ids: NDArray[np.integer]) -> bool:
    return (
        type(ids) is np.ndarray
        and ids.ndim == 1
        and ids.dtype.itemsize in (4, 8)
        and ids.flags.c_contiguous
        and ids.flags.writeable
    )


def skip_shuffle(rng: np.random.Generator, length: int) -> GeneratorState:
    """Advance ``rng`` exactly as ``rng.shuffle`` of ``length`` elements would; return the state before."""
    state = rng.bit_generator.state
    if native is not None:
        with rng.bit_generator.lock:
            native.skip(rng.bit_generator.capsule, length)
    else:
        # int64 items take numpy's specialised shuffle loop, about twice as fast as other sizes.
        rng.shuffle(as_strided(np.zeros(1, np.int64), shape=(length,), strides=(0,)))
    return state


def generator_at(state: GeneratorState) -> np.random.Generator:
    """A new generator in ``state`` (a ``bit_generator.state``), which draws what its source would."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


class UnitShuffler:
    """Shuffles slices exactly as ``rng.shuffle`` one after another would, big ones in parallel."""

    def __init__(self, workers: int | None = None) -> None:
        workers = workers if workers is not None else min(8, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="mds-shuffle") if workers > 1 else None
        self.threads = workers if self._pool is not None else 1  # how many ``run`` calls may run at once
        self._pending: list[Future[None]] = []

    def shuffle(self, piece: NDArray[np.integer], rng: np.random.Generator) -> None:
        """``rng.shuffle(piece)``; the result is ready after ``wait()``."""
        if self._pool is None or len(piece) < _OFFLOAD_MIN:
            shuffle_in_place(rng, piece)
            return
        state = skip_shuffle(rng, len(piece))
        self._pending.append(self._pool.submit(shuffle_in_place, generator_at(state), piece))

    def shuffle_range_from(self, piece: NDArray[np.integer], begin: int, state: GeneratorState) -> None:
        """Fill ``piece`` with ``begin, begin+1, ...`` and shuffle it as a generator in ``state`` would.

        ``state`` comes from :func:`skip_shuffle`; the result is ready after ``wait()``.
        """
        twin = generator_at(state)

        def fill_and_shuffle() -> None:
            piece[:] = np.arange(begin, begin + len(piece), dtype=piece.dtype)
            shuffle_in_place(twin, piece)

        if self._pool is None or len(piece) < _OFFLOAD_MIN:
            fill_and_shuffle()
        else:
            self._pending.append(self._pool.submit(fill_and_shuffle))

    def run(self, work: Callable[[], None]) -> None:
        """``work()`` on a worker thread (inline without one); done after ``wait()``."""
        if self._pool is None:
            work()
        else:
            self._pending.append(self._pool.submit(work))

    def wait(self) -> None:
        """Wait for the shuffles submitted so far, raising the first one's error."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        """Wait for the pending shuffles and stop the thread pool."""
        self.wait()
        if self._pool is not None:
            self._pool.shutdown()

    def __enter__(self) -> UnitShuffler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shuffle_slices(
    ids: NDArray[np.integer], lengths: NDArray[np.int64], rng: np.random.Generator, shuffler: UnitShuffler | None = None
) -> None:
    """Shuffle consecutive slices of ``ids`` of the given lengths, one ``rng.shuffle`` call each.

    With a ``shuffler`` big slices may still be in progress on return (``shuffler.wait()``).
    """
    offset = 0
    for length in lengths.tolist():
        piece = ids[offset : offset + length]
        if shuffler is None:
            shuffle_in_place(rng, piece)
        else:
            shuffler.shuffle(piece, rng)
        offset += length


_CHUNK = 1 << 16  # elements filled at a time, so each span is shuffled while still in cache


def shuffled_ranges(
    begins: NDArray[np.int64],
    ends: NDArray[np.int64],
    rng: np.random.Generator,
    shuffler: UnitShuffler | None = None,
    dtype: type[np.integer] = np.int64,
) -> NDArray[np.integer]:
    """``concat_ranges`` with each span shuffled by ``rng``, span by span in order.

    With a ``shuffler`` the big spans may still be shuffling on return (``shuffler.wait()``).
    """
    lengths = ends - begins
    ids = np.empty(int(lengths.sum()), dtype)
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


def skip_shuffles(lengths: NDArray[np.int64], rng: np.random.Generator) -> list[GeneratorState]:
    """:func:`skip_shuffle` for consecutive slices; the states to shuffle any of them later."""
    return [skip_shuffle(rng, length) for length in lengths.tolist()]
