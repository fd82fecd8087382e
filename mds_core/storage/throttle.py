"""A store's "slow down" answer (HTTP 429 or 503 with ``Retry-After``).

Store clients report it to ``RemoteStore``'s retry loop.

Throttling is not a failure of the request: the service asks to be called again after a while. The
retry loop waits as long as it asks, within the file's deadline, without counting the attempt, so
many loader workers sharing one rate limit slow down instead of failing.
"""

from __future__ import annotations


class Throttled(ConnectionError):
    """The store asked to be called again in ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
