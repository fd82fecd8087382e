"""Fork safety of store clients: each process opens its own, and a forked child never frees its parent's.

The only module state of the storage layer, and it cannot live on a ``RemoteStore``. An async client (s3fs, gcsfs,
adlfs) belongs to the fsspec event-loop thread of the process that made it. A forked child (a DataLoader worker)
inherits the object but not the thread, and when the child frees the object, its finaliser waits on that missing
thread: about 1 s per client, in every worker, every epoch, also for a client that was already garbage in the
parent. A blocking client's pooled connections are the parent's too. So every client is registered here as it is
opened; after a fork the child pins the inherited ones for the rest of its life (never used, never finalised) and
opens its own.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Any

_OPENED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_INHERITED: list[Any] = []
_OPEN_LOCK = threading.Lock()  # one client per store and process, whichever thread asks first


def _pin_inherited_clients() -> None:
    """In a forked child: keep every client opened before the fork alive, unused, for good."""
    global _OPEN_LOCK
    _OPEN_LOCK = threading.Lock()  # the parent's may have been held by another thread at the fork
    _INHERITED.extend(client for client in list(_OPENED.values()) if client is not None)
    _OPENED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pin_inherited_clients)


def opening() -> threading.Lock:
    """The lock to hold while a store opens this process's client (this process's lock: see the fork)."""
    return _OPEN_LOCK


def register(client: Any) -> None:
    """Remember ``client`` as opened by this process, so that a forked child keeps it unfreed."""
    with contextlib.suppress(TypeError):  # not weak-referenceable: not a client that needs guarding
        _OPENED[id(client)] = client


def inherited_clients() -> int:
    """How many clients this process inherited from its parent at a fork (and keeps unused)."""
    return len(_INHERITED)
