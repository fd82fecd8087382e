"""Deterministic crash points for tests: die by SIGKILL at exactly the k-th step of an operation.

Every step that changes what a reader can see (a file renamed into place, an object uploaded or
deleted, a cache entry evicted) calls ``kill_point(name)``. Normally that is one environment
lookup. A crash-consistency test sets ``MDS_KILL_LOG`` to a file: each step then appends its name
there, so a first run lists an operation's steps, and with ``MDS_KILL_AT=k`` the process that
records the k-th step kills itself on the spot, as a power cut or an OOM kill would, with no
cleanup handlers run. The log is a file, not a counter in memory, so steps taken by several
processes (loader workers, a writer's uploads) share one count.
"""

from __future__ import annotations

import os
import signal

from mds_core.errors import PlatformError

try:
    import fcntl
except ImportError:  # not POSIX: kill points are for crash tests, which run on Linux; reading works without
    fcntl = None  # type: ignore[assignment]

LOG_VARIABLE = "MDS_KILL_LOG"
AT_VARIABLE = "MDS_KILL_AT"


def kill_point(step: str) -> None:
    """Record ``step``; SIGKILL this process if it is the step ``MDS_KILL_AT`` names."""
    log = os.environ.get(LOG_VARIABLE)
    if not log:
        return
    if fcntl is None:
        raise PlatformError(f"{LOG_VARIABLE}={log}: crash-point logging needs a POSIX system (Linux or macOS)")
    with open(log, "a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        number = sum(1 for _ in file) + 1
        file.write(f"{step.replace(chr(10), ' ')}\n")
        file.flush()
        if os.environ.get(AT_VARIABLE) == str(number):
            # Still holding the lock, so no other thread of this process logs a step after this one.
            os.kill(os.getpid(), signal.SIGKILL)
