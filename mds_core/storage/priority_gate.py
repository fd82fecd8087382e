"""Slots handed out in priority order: the shard needed soonest gets the next free one.

``ShardCache`` holds one gate for its transfers (``threads`` slots) and one for decompressions (the CPUs). A
download that has to wait (a throttled file's ``Retry-After``, a backoff after a failed attempt) sleeps through
``away``: its slot goes to the next shard in line meanwhile, and it takes the next free slot back before any shard
needed later than it.

A slot that is given back passes straight to the first waiter in line, which alone is woken: dozens of threads
may wait at a download pool's gate (``ShardCache`` has 8 threads per slot), and waking them all at each hand-off
to let one through would spend the client's CPU on the others' wake-ups.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Iterator


class PriorityGate:
    """At most ``slots`` holders at once; waiters go in ascending rank (the shard needed soonest first)."""

    def __init__(self, slots: int) -> None:
        self.slots = self._free = max(1, slots)
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, threading.Event]] = []  # heap of (rank, arrival, its turn)
        self._arrivals = itertools.count()
        self._holders: dict[int, int] = {}  # thread id -> the rank it holds its slot with

    @contextlib.contextmanager
    def slot(self, rank: int) -> Iterator[None]:
        """Hold a slot for the ``with`` block, taken in ``rank``'s place in line.

        Args:
            rank: lower goes first (a shard's place in the order it is needed; -1 before all).
        """
        self._take(rank)
        try:
            yield
        finally:
            self._give_back()

    def away(self, seconds: float) -> None:
        """Sleep; a thread holding a slot gives it up meanwhile and takes it back in its rank's place in line.

        Args:
            seconds: how long.
        """
        rank = self._holders.get(threading.get_ident())
        if rank is None:
            time.sleep(seconds)
            return
        self._give_back()
        try:
            time.sleep(seconds)
        finally:
            self._take(rank)

    def _take(self, rank: int) -> None:
        with self._lock:
            if self._free:  # a free slot means no one waits: a given-back slot goes to a waiter first
                self._free -= 1
                self._holders[threading.get_ident()] = rank
                return
            turn = threading.Event()
            heapq.heappush(self._waiting, (rank, next(self._arrivals), turn))
        turn.wait()  # set by ``_give_back``, which handed this thread its slot
        with self._lock:
            self._holders[threading.get_ident()] = rank

    def _give_back(self) -> None:
        with self._lock:
            self._holders.pop(threading.get_ident(), None)
            if self._waiting:
                heapq.heappop(self._waiting)[2].set()
            else:
                self._free += 1
