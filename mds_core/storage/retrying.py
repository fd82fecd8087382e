"""The attempts of one ``RemoteStore`` operation: what is retried, what is waited for, what fails at once.

A failed attempt (a network error, a body cut short) is retried after a backoff, ``retry`` attempts in all. A store
that throttles is waited for as it asks and a download whose first byte is late is asked for again at once
(``mds_core.storage.first_byte``); neither counts as an attempt, and each has its own cap. A missing file, a refused
permission and missing credentials fail at once. Every wait goes through ``sleep``, so that a download pool can give
the download's slot to another file while this one waits (``ShardCache``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from mds_core.errors import ConfigurationError, MDSError, MissingDependencyError, StorageError, StoreFileNotFoundError
from mds_core.storage.first_byte import LateFirstByte
from mds_core.storage.throttle import throttle_of

T = TypeVar("T")

MAX_BACKOFF = 8.0  # seconds: the longest wait after a failed attempt


def retrying(
    what: str,
    attempt: Callable[[], T],
    *,
    retry: int,
    timeout: float | None,
    advice_for: Callable[[BaseException], str | None],
    sleep: Callable[[float], None] | None = None,
) -> T:
    """``attempt()``'s result, retried on transient errors; else a ``StorageError`` (or ``ConfigurationError``).

    Args:
        what: the operation, for messages (``download of <url>``).
        attempt: one try of it.
        retry: failed attempts allowed in all (at least 1).
        timeout: the deadline of a throttled file's waits in seconds; None: ``THROTTLE_BUDGET``.
        advice_for: what to set for a failure no retry can fix (no credentials), else None.
        sleep: how to wait between tries; None: ``time.sleep``.
    """
    wait = sleep or time.sleep
    last: BaseException | None = None
    failures, throttles, started = 0, 0, time.monotonic()
    while failures < retry:
        try:
            return attempt()
        except (StorageError, ConfigurationError, MissingDependencyError):
            raise
        except FileNotFoundError as err:  # retrying cannot help
            raise StoreFileNotFoundError(f"{what} failed: {describe(err)}") from err
        except (PermissionError, IsADirectoryError, NotADirectoryError) as err:
            raise StorageError(f"{what} failed: {describe(err)}") from err
        except LateFirstByte:  # asked again at once; the watch that raised it caps how often
            continue
        except Exception as err:  # network errors come in many library-specific types
            if (throttled := throttle_of(err)) is not None:  # not a failure: wait, if the deadline allows
                throttles += 1
                wait(throttled.wait_within(what, throttles, time.monotonic() - started, timeout))
                continue
            if (advice := advice_for(err)) is not None:  # no credentials: retrying cannot help
                raise ConfigurationError(f"{what} failed: {describe(err)}; {advice}") from err
            last, failures = err, failures + 1
            if failures < retry:
                wait(min(MAX_BACKOFF, 0.25 * 2 ** (failures - 1)) + random.uniform(0, 0.1))
    message = f"{what} failed after {retry} attempt(s): {describe(last)}"
    if isinstance(last, MDSError):  # e.g. a checksum mismatch: keep its type, add the context
        raise type(last)(message) from last
    raise StorageError(message) from last


def describe(err: BaseException | None) -> str:
    """``err`` for a message: its type and text, the type once."""
    if err is None:
        return "unknown error"
    text = str(err) or type(err).__name__
    return f"{type(err).__name__}: {text}" if type(err).__name__ not in text else text
