"""Slots handed out in priority order: the shard needed soonest gets the next free one.

``ShardCache`` holds one gate for its transfers (``threads`` slots) and one for decompressions (the CPUs). A
download that has to wait (a throttled file's ``Retry-After``, a backoff after a failed attempt) sleeps through
``away``: its slot goes to the next shard in line meanwhile, and it takes the next free slot back before any shard
needed later than it.
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
        self._ready = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # heap of (rank, arrival)
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
        ticket = (rank, next(self._arrivals))
        with self._ready:
            heapq.heappush(self._waiting, ticket)
            while not self._free or self._waiting[0] != ticket:
                self._ready.wait()
            heapq.heappop(self._waiting)
            self._free -= 1
            self._holders[threading.get_ident()] = rank
            self._ready.notify_all()  # the next in line may have a slot too

    def _give_back(self) -> None:
        with self._ready:
            self._free += 1
            self._holders.pop(threading.get_ident(), None)
            self._ready.notify_all()
