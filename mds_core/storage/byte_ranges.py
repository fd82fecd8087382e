"""Byte ranges of remote files asked for together, each exactly as long as asked.

What ``RemoteStore.read_ranges`` sends: the samples of a first batch, read from shards still on their
way (``mds_core.streaming.ranged``). A try asks again only for the ranges not yet answered, so a store
that refuses a fifth of the requests (throttling) costs a fifth more requests, not a new round of all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from mds_core.storage.s3 import MAX_CONNECTIONS
from mds_core.storage.transfer_limits import Truncated, with_deadline

THREADS = MAX_CONNECTIONS  # a blocking reader's requests at once: as many as its client keeps connections


class RangeReads:
    """The ranges ``(path, begin, end)`` and what has come back for each so far.

    Args:
        ranges: the file's path inside the filesystem, and the first and past-the-last byte.
    """

    def __init__(self, ranges: Sequence[tuple[str, int, int]]) -> None:
        self.ranges = list(ranges)
        self.parts: list[bytes | None] = [None] * len(self.ranges)

    def attempt(self, fs: Any, read_range: Callable[[Any], Any], timeout: float | None) -> list[bytes]:
        """One try for the ranges still missing, together under one ``timeout``; every range's bytes, or the first error.

        Args:
            fs: the async filesystem.
            read_range: the store kind's ``read_range``.
            timeout: seconds for the whole try, or None.
        """
        from fsspec.asyn import sync

        missing = self._missing()
        read = read_range(fs)

        async def gather() -> list[Any]:
            return await asyncio.gather(*(read(*self.ranges[i]) for i in missing), return_exceptions=True)

        return self._take(missing, sync(fs.loop, with_deadline, gather(), timeout))

    def attempt_blocking(self, read: Callable[[str, int, int], bytes], timeout: float | None) -> list[bytes]:
        """``attempt`` for a blocking reader: its ``read(path, begin, end)`` on ``THREADS`` threads at most.

        A range not answered within ``timeout`` is left to finish alone and fails this try.
        """
        missing = self._missing()
        pool = ThreadPoolExecutor(min(THREADS, len(missing) or 1), thread_name_prefix="mds-ranges")
        futures = [pool.submit(read, *self.ranges[i]) for i in missing]
        done, _ = wait(futures, timeout)
        pool.shutdown(wait=False, cancel_futures=True)
        late = TimeoutError(f"no answer within the {timeout} s timeout")
        return self._take(missing, [(f.exception() or f.result()) if f in done else late for f in futures])

    def _missing(self) -> list[int]:
        return [i for i, part in enumerate(self.parts) if part is None]

    def _take(self, missing: list[int], answers: Sequence[Any]) -> list[bytes]:
        """Keep each answer of the right length; every range's bytes, or the first error."""
        first_error: BaseException | None = None
        for i, answer in zip(missing, answers):
            _, begin, end = self.ranges[i]
            if not isinstance(answer, BaseException) and len(answer) != end - begin:
                answer = Truncated(f"bytes {begin}-{end - 1}: got {len(answer)} bytes")
            if isinstance(answer, BaseException):
                first_error = first_error or answer
            else:
                self.parts[i] = answer
        if first_error is not None:
            raise first_error
        return [part for part in self.parts if part is not None]
