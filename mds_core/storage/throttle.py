"""A store's "slow down" answer: HTTP 429, S3's ``503 SlowDown``, or a 503 with ``Retry-After`` (the Files API).

Throttling is not a failure of the request: the service asks to be called again after a while. ``RemoteStore``'s
retry loop does not count it as an attempt. It waits as long as ``Retry-After`` says, else a backoff with full
jitter (a random wait up to a cap that doubles with each throttled try of the file), so that many loader threads
throttled together come back spread out rather than in a burst. Each file may be throttled ``MAX_THROTTLED``
times, within its deadline; then the download fails with a ``StorageError`` that says the store kept throttling.

``throttle_of`` recognises the answer whichever client raised it: a ``Throttled`` from a store's own client (the
Files API's, for a 429 or 503 with ``Retry-After``), and botocore's ``ClientError`` with a throttling code or a
429 (s3fs raises it as the cause of its ``OSError``). A 503 that does not ask to slow down is an outage: a failed
attempt, counted against ``retry``.
"""

from __future__ import annotations

import random
from typing import Any

from mds_core.errors import StorageError, chain_of

THROTTLE_BUDGET = 300.0  # seconds of throttled waits per file when there is no timeout
MAX_THROTTLED = 12  # throttled tries per file: at a 20% throttle rate, 12 in a row happen once in 4·10⁸ files
_BACKOFF_BASE = 0.05  # seconds: the first throttled try waits up to this, the next up to twice as long...
_BACKOFF_CAP = 4.0

# Error codes S3 and S3-compatible stores (and botocore's names for AWS services) use to say "slow down".
_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequests",
        "TooManyRequestsException",
        "429",
    }
)


class Throttled(ConnectionError):
    """The store asked to be called again: in ``retry_after`` seconds, or (None) after a backoff of our choosing."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def wait(self, tries: int) -> float:
        """Seconds to wait before the next try: ``Retry-After``, else full jitter on a doubling cap.

        Args:
            tries: how many times this file has been throttled, this one included.
        """
        if self.retry_after is not None:
            return self.retry_after
        return random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** (tries - 1)))

    def wait_within(self, what: str, tries: int, elapsed: float, timeout: float | None) -> float:
        """``wait(tries)``, or a ``StorageError`` when the file was throttled too often or the wait passes its deadline.

        Args:
            what: the operation, for the message (``download of <url>``).
            tries: how many times this file has been throttled, this one included.
            elapsed: seconds since the file's first attempt began.
            timeout: the file's deadline in seconds; None: ``THROTTLE_BUDGET`` of waiting in all.
        """
        said = f"{type(self).__name__}: {self}"
        if tries > MAX_THROTTLED:
            raise StorageError(
                f"{what} failed: the store throttled it {tries} times in a row ({said}): it is overloaded, or "
                "rate-limits this prefix; fewer workers (or download threads) ask less of it"
            ) from self
        budget = THROTTLE_BUDGET if timeout is None else timeout
        wait = self.wait(tries)
        if elapsed + wait > budget:
            raise StorageError(
                f"{what} failed: the store is throttling requests ({said}) and asks to wait "
                f"{wait:g} s more, past the {budget:g} s deadline for the file"
            ) from self
        return wait


def throttle_of(err: BaseException) -> Throttled | None:
    """The store's "slow down" in ``err`` or its causes, as a ``Throttled``; None for any other error.

    Args:
        err: what a store client raised.
    """
    for cause in chain_of(err):
        if isinstance(cause, Throttled):
            return cause
        response = getattr(cause, "response", None)  # botocore's ClientError, under s3fs's OSError
        if isinstance(response, dict) and _throttling(response):
            return Throttled(str(cause), _retry_after(response))
    return None


def _throttling(response: dict[str, Any]) -> bool:
    """A throttling code, or 429; a 503 without one (an outage, not a request to slow down) is a failed attempt."""
    code = str((response.get("Error") or {}).get("Code") or "")
    return code in _CODES or (response.get("ResponseMetadata") or {}).get("HTTPStatusCode") == 429


def _retry_after(response: dict[str, Any]) -> float | None:
    headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    value = {str(name).lower(): value for name, value in headers.items()}.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, back off instead
        return None
