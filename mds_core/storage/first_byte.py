"""A download whose first byte is late is asked for again, as S3's performance guide advises for slow requests.

A stalled connection (a store's slow replica, a lost packet on a kept-alive connection) otherwise holds the shard,
and the reader waiting for it, until the whole transfer's deadline (60 s by default). So each download gets a
first-byte deadline where the store's answer can be seen: on an async store (s3fs, gcsfs, adlfs, whose progress
callback hears of the answer before any byte is written), and on one whose client's ``open`` returns when the store
answers (the Files API's, ``StoreKind.answers_on_open``). The deadline is ``FLOOR`` seconds, or ``FACTOR`` times the
median first-byte time of the store's recent downloads in this process when that is longer (a far or loaded store
is not cut short), doubling with each late request of the file, as the guide's "retry after 2 s, then 4 s" does.
Past the deadline the request is cancelled and sent again at once. A blocking client's request cannot be cancelled:
it is left to finish on a thread of its own, and its answer is closed unread (``FirstByteWatch.answer``). A file is
re-requested ``MAX_LATE`` times at most; then it waits for its transfer's deadline, as before. A late request is not
a failed attempt: ``retry`` still counts the failures.

``MDS_FIRST_BYTE_DEADLINE`` in the environment sets ``FLOOR`` (seconds) for the stores opened afterwards, or turns
the deadline off (``off``): for a store whose first bytes are slow for a known reason, or a run that must send each
request once.

No deadline is set until the store has answered a download in this process: that first answer also pays for
connecting the process's client (credentials, botocore's service models, a session): 0.13 s against a kept-alive
request's 0.005-0.01 s on loopback S3. Each forked or spawned process (a DataLoader worker) connects anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, Protocol, TypeVar

from mds_core.errors import ConfigurationError

FLOOR = 1.0  # seconds: the shortest first-byte deadline
FACTOR = 8  # times the median first-byte time of the store's recent downloads
MAX_LATE = 2  # re-requests of one file for a late first byte
DEADLINE_ENV = "MDS_FIRST_BYTE_DEADLINE"  # seconds instead of FLOOR, or "off"
_RECENT = 64  # first-byte times the median is taken over


class _Closable(Protocol):
    def close(self) -> None: ...


Answer = TypeVar("Answer", bound=_Closable)


class LateFirstByte(ConnectionError):
    """No byte of the answer came within the first-byte deadline: the request was cancelled, to be sent again."""


class FirstByteTimes:
    """The first-byte times of one store's recent downloads in this process, and the deadline they give."""

    def __init__(self) -> None:
        self._recent: deque[float] = deque(maxlen=_RECENT)
        self._answered_in: int | None = None  # the process whose client the store has answered
        self._floor = _floor_from_environment()

    def record(self, seconds: float) -> None:
        """Note one download's first-byte time.

        Args:
            seconds: from sending the request to the store's answer.
        """
        self._recent.append(seconds)
        self._answered_in = os.getpid()

    def deadline(self) -> float | None:
        """Seconds a download's first byte may take: ``FLOOR``, or ``FACTOR`` times the recent median if longer.

        None until the store has answered this process once (its client may still be connecting), and when
        ``MDS_FIRST_BYTE_DEADLINE`` is ``off``.
        """
        if self._floor is None or self._answered_in != os.getpid():
            return None
        return max(self._floor, FACTOR * statistics.median(self._recent))

    def watch(self) -> FirstByteWatch:
        """A watch for the requests of one file."""
        return FirstByteWatch(self)


class FirstByteWatch:
    """The first-byte deadlines of one file's requests: doubled after each late one, none after ``MAX_LATE``."""

    def __init__(self, times: FirstByteTimes) -> None:
        self.times, self.late = times, 0

    async def first_bytes(self, task: asyncio.Future[Any], callback: Any, timeout: float | None) -> float:
        """Wait for ``task``'s first byte (``callback`` hears of it) or its end; seconds waited.

        With no first-byte deadline, this waits for the end (or ``timeout``) to learn the first-byte time.

        Args:
            task: the running transfer.
            callback: the transfer's progress callback, whose ``first_at`` is set when the store answers.
            timeout: the whole transfer's deadline: a first-byte deadline as long is not set.

        Raises:
            LateFirstByte: the deadline passed first; ``task`` is cancelled.
        """
        deadline, started = self._deadline(timeout), time.monotonic()
        done, _ = await asyncio.wait({task}, timeout=timeout if deadline is None else deadline)
        first_at = getattr(callback, "first_at", None)
        if first_at is not None:
            self.times.record(first_at - started)
        if deadline is None or done or first_at is not None:
            return time.monotonic() - started
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # what the cancelled transfer raises
            await task
        raise self._late(deadline)

    def answer(self, request: Callable[[], Answer], timeout: float | None) -> Answer:
        """``request()``'s answer: a blocking call that returns once the store answers (an opened download).

        Args:
            request: sends the request; returns the opened answer, to be closed by the caller.
            timeout: the whole transfer's deadline: a first-byte deadline as long is not set.

        Raises:
            LateFirstByte: the deadline passed first; the request finishes alone and its answer is closed.
        """
        deadline, started = self._deadline(timeout), time.monotonic()
        if deadline is None:
            answered = request()
        else:
            future = _in_thread(request)
            if not wait([future], deadline).done:
                future.add_done_callback(_close_answer)  # at once if it has just come
                raise self._late(deadline)
            answered = future.result()
        self.times.record(time.monotonic() - started)
        return answered

    def _late(self, deadline: float) -> LateFirstByte:
        """Count one late request of the file; the error that has it asked again."""
        self.late += 1
        return LateFirstByte(f"no answer within {deadline:g} s; asked again")

    def _deadline(self, timeout: float | None) -> float | None:
        """This request's first-byte deadline; None when there is none, or it would not come before ``timeout``."""
        typical = self.times.deadline()
        if typical is None or self.late >= MAX_LATE:
            return None
        deadline = typical * 2**self.late
        return None if timeout is not None and deadline >= timeout else deadline


def _floor_from_environment() -> float | None:
    """``FLOOR``, or what ``MDS_FIRST_BYTE_DEADLINE`` says instead (None: ``off``)."""
    value = os.environ.get(DEADLINE_ENV, "").strip()
    if not value:
        return FLOOR
    if value.lower() == "off":
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ConfigurationError(f"{DEADLINE_ENV}={value!r} must be a number of seconds above 0, or 'off'")
    return seconds


def _in_thread(request: Callable[[], Answer]) -> Future[Answer]:
    """``request()`` on a thread of its own: a blocking request that may be left to finish alone."""
    future: Future[Answer] = Future()

    def run() -> None:
        try:
            future.set_result(request())
        except BaseException as err:  # the caller's, through future.result(); dropped once abandoned
            future.set_exception(err)

    threading.Thread(target=run, name="mds-first-byte", daemon=True).start()
    return future


def _close_answer(future: Future[Answer]) -> None:
    """Close an abandoned request's answer, if it brought one."""
    if future.exception() is None:
        future.result().close()
