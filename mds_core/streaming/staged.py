"""A worker's sample ids for an epoch in two stages: its first batches at once, the rest once the node has ordered them.

The first batches of an epoch (or of a resumed one) are a window of the order that costs the same
wherever the epoch starts (``mds_core.order.work.generate_head``). The whole order is made on a
thread meanwhile, once per node (``JobDir.shared_array``: the first process to take its lock
computes it, the others wait for it in the kernel), so training starts without waiting for it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

BACKGROUND_NICENESS = 10  # Linux's niceness is per thread, and the threads a thread starts inherit it


class StagedRow:
    """Slices of a worker's ids: from ``head`` while the whole row is still being made, from the whole row after.

    ``head`` is the whole row's beginning. Slicing past it, or ``len()``, waits for the whole row,
    and raises what making it raised.
    """

    def __init__(self, head: np.ndarray, whole: Callable[[], np.ndarray]) -> None:
        self._head = head
        self._whole: np.ndarray | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        # A daemon: a worker left early (``break``) must not wait at exit for an order no one reads.
        threading.Thread(target=self._make, args=(whole,), name="mds-order", daemon=True).start()

    def _make(self, whole: Callable[[], np.ndarray]) -> None:
        # Behind the loading of the first batches: this thread, and the threads it starts, yield the CPU to them.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICENESS)
        try:
            self._whole = whole()
        except BaseException as err:  # raised where the row is read, in the iterating thread
            self._error = err
        finally:
            self._done.set()

    def whole(self) -> np.ndarray:
        """The whole row, waiting for it if it is still being made."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._whole is not None
        return self._whole

    def ready(self) -> int:
        """How many ids can be read now without waiting."""
        return len(self.whole()) if self._done.is_set() else len(self._head)

    def __len__(self) -> int:
        return len(self.whole())

    def __getitem__(self, span: slice) -> np.ndarray:
        start = span.start or 0
        if start < len(self._head) and not self._done.is_set():
            return self._head[start : span.stop]  # may end early, at the head's end
        return self.whole()[span]


def slices(row: Any, step: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(begin, ids)`` for consecutive slices of a row (an array, a :class:`StagedRow` or a scheduled row)."""
    begin = 0
    while len(ids := row[begin : begin + step]):
        yield begin, ids
        begin += len(ids)


def ready(row: Any) -> Callable[[], int]:
    """How many of a row's ids can be read without waiting, asked as it grows."""
    return row.ready if isinstance(row, StagedRow) else lambda: len(row)
