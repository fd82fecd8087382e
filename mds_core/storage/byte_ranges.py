"""Byte ranges of remote files asked for together, each exactly as long as asked.

What ``RemoteStore.read_ranges`` sends: the samples of a first batch, read from shards still on their
way (``mds_core.streaming.ranged``). A try asks again only for the ranges not yet answered, so a store
that refuses a fifth of the requests (throttling) costs a fifth more requests, not a new round of all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from mds_core.storage.transfer_limits import Truncated, with_deadline


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

        missing = [i for i, part in enumerate(self.parts) if part is None]
        read = read_range(fs)

        async def gather() -> list[Any]:
            return await asyncio.gather(*(read(*self.ranges[i]) for i in missing), return_exceptions=True)

        first_error: BaseException | None = None
        for i, answer in zip(missing, sync(fs.loop, with_deadline, gather(), timeout)):
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
