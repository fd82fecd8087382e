"""What bounds one transfer of a ``RemoteStore``: its deadline and, for a download, the bytes it may bring.

A download ends as soon as its body passes the size its index declares, or a cap for a file whose
size nothing declares (an index): ``copy_until`` counts what it copies for the stores read through
``fs.open`` (local disk, Hugging Face, volumes), and ``body_limit`` is the fsspec progress callback
the async clients (s3fs, gcsfs, adlfs) call as they stream. Either raises ``Truncated``, which the
store counts as a failed attempt, like a body cut short.
"""

from __future__ import annotations

import asyncio
import functools
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mds_core.storage.first_byte import FirstByteWatch

COPY_CHUNK = 8 << 20


class Truncated(Exception):
    """A download shorter or longer than the index says (or than its cap): retried like a network error."""


@dataclass(frozen=True)
class Bound:
    """The most bytes a download may bring, and why (``expected 100``, ``at most 1024 allowed``)."""

    limit: int
    why: str

    def announced(self, size: int) -> str:
        """The error's reason when the store announces more bytes than allowed."""
        return f"the store announces {size} bytes, {self.why}"

    def passed(self) -> str:
        """The error's reason when more bytes arrive than allowed."""
        return f"got more than {self.limit} bytes, {self.why}"


def bound(expected_bytes: int | None, max_bytes: int | None) -> Bound | None:
    """The tighter of a declared size and a cap, if either is given."""
    bounds = []
    if expected_bytes is not None:
        bounds.append(Bound(expected_bytes, f"expected {expected_bytes}"))
    if max_bytes is not None:
        bounds.append(Bound(max_bytes, f"at most {max_bytes} allowed"))
    return min(bounds, key=lambda each: each.limit, default=None)


def copy_until(source: Any, target: Any, deadline: float | None, limit: Bound | None = None) -> None:
    """Copy a chunk at a time to the end, or until the deadline, or a byte past ``limit`` (never written)."""
    copied = 0
    while chunk := source.read(COPY_CHUNK if limit is None else min(COPY_CHUNK, limit.limit + 1 - copied)):
        copied += len(chunk)
        if limit is not None and copied > limit.limit:
            raise Truncated(limit.passed())
        target.write(chunk)
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("did not finish within the download timeout")


def download_blocking(
    fs: Any, rpath: str, lpath: str, timeout: float | None, limit: Bound | None, watch: FirstByteWatch | None
) -> None:
    """``rpath`` of a blocking filesystem into ``lpath``, within ``timeout`` and ``limit``.

    With a ``watch``, the request must be answered within its first-byte deadline (``FirstByteWatch.answer``): for a
    filesystem whose ``open`` returns when the store answers (``StoreKind.answers_on_open``).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    opened = functools.partial(fs.open, rpath, "rb")
    source = opened() if watch is None else watch.answer(opened, timeout)
    with source, open(lpath, "wb") as target:
        copy_until(source, target, deadline, limit)


@functools.cache
def _body_limit_class() -> type:
    # Made on first use: importing fsspec takes ~0.15 s, and the store imports it only for transfers.
    from fsspec.callbacks import Callback

    class BodyLimit(Callback):  # type: ignore[misc]  # fsspec ships no types
        """Raises ``Truncated`` from the client's progress calls once the body passes its bound."""

        def __init__(self, limit: Bound) -> None:
            super().__init__()
            self.limit = limit
            self.exceeded: str | None = None  # what passed the bound, once something has
            self.first_at: float | None = None  # time.monotonic() when the store answered (``first_byte``)

        def call(self, hook_name: str | None = None, **kwargs: Any) -> None:
            if self.first_at is None:
                self.first_at = time.monotonic()
            if self.size is not None and self.size > self.limit.limit:  # refused before any byte is written
                self.exceeded = self.limit.announced(self.size)
            elif self.value > self.limit.limit:
                self.exceeded = self.limit.passed()
            if self.exceeded is not None:
                raise Truncated(self.exceeded)

    return BodyLimit


def body_limit(limit: Bound) -> Any:
    """An fsspec callback that ends a download once its body passes ``limit``.

    s3fs's ``_get_file``, gcsfs's ``_get_file_request`` and adlfs's ``_get_file`` call its
    ``set_size`` with the length the store announces, before writing anything, then its
    ``relative_update`` (adlfs: ``absolute_update``) as the body arrives; what it raises ends the
    transfer. ``exceeded`` says what passed the bound (see ``run_bounded``); ``first_at`` when the store answered.
    """
    return _body_limit_class()(limit)


def run_bounded(transfer: Callable[[Any], None], limit: Bound) -> None:
    """``transfer(callback)`` with a ``body_limit`` callback: a refusal is a ``Truncated`` even if the client wrapped it."""
    callback = body_limit(limit)
    try:
        transfer(callback)
    except Truncated:
        raise
    except Exception as err:
        if callback.exceeded is None:
            raise
        raise Truncated(callback.exceeded) from err


async def with_deadline(coro: Any, timeout: float | None, watch: Any = None, callback: Any = None) -> Any:
    """Cancel the transfer itself at the deadline, so nothing keeps writing to the temporary file.

    With a ``FirstByteWatch`` and the transfer's progress ``callback``, a transfer whose first byte is late is
    cancelled at once (``LateFirstByte``), to be asked for again.
    """
    task = asyncio.ensure_future(coro)
    try:
        if watch is not None:
            waited = await watch.first_bytes(task, callback, timeout)
            timeout = None if timeout is None else max(0.0, timeout - waited)
        return await asyncio.wait_for(task, timeout)
    except Truncated as err:
        _close_refused_body(err)
        raise


def _close_refused_body(err: Truncated) -> None:
    """Close the response a client left open when its callback refused the body, on the event loop.

    s3fs opens the body before it calls ``set_size`` and closes it only in a later ``finally``: a
    refusal there would leave the response, and its connection, to the garbage collector, in
    whichever thread that runs. Closed here, the connection goes back at once, from the loop's thread.
    """
    for frame, _ in traceback.walk_tb(err.__traceback__):
        close = getattr(frame.f_locals.get("body"), "close", None)
        if callable(close):
            close()
