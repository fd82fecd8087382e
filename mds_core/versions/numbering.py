"""Which number a commit takes, and when a transaction id says it started.

A commit follows the newest version its writer saw (``seen``); a retried commit looks for its own earlier
success among the versions after that floor, or, when the floor is unknown, among those created since
its transaction id's time stamp (less ``CLOCK_SKEW``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from mds_core.errors import ConfigurationError, VersionConflictError
from mds_core.versions.manifest import MODES, VersionInfo

# How far another machine's clock may lag the one that named a transaction: a retried commit looks for
# its earlier success among the versions created since the transaction started, less this much.
CLOCK_SKEW = dt.timedelta(hours=1)
STAMP_FORMAT = "%Y%m%dT%H%M%S"
_STAMP = re.compile(r"(\d{8}T\d{6})-")


def check_mode(mode: str) -> None:
    """Refuse a mode other than the transaction modes."""
    if mode not in MODES:
        raise ConfigurationError(f"mode must be one of {MODES}, got {mode!r}")


def seen_floor(parent: Any, seen: Any) -> int | None:
    """The newest version the writer saw, if the arguments say it (None: unknown)."""
    if seen == "parent":
        seen = parent
    if seen is None:
        return 0
    return seen if isinstance(seen, int) and not isinstance(seen, bool) else None


def follows(parent: Any, seen: Any, base: VersionInfo | None, newest: int | None) -> int:
    """The version the new one follows: ``seen``, resolved (0: none)."""
    if seen == "parent":
        seen = parent if parent is None or isinstance(parent, int) else "latest"
    if seen == "latest":
        return newest or 0
    if seen is not None and (not isinstance(seen, int) or isinstance(seen, bool) or seen < 1):
        raise ConfigurationError(f"seen must be 'parent', 'latest', a version number or None, got {seen!r}")
    if base is not None and base.version > (seen or 0):
        raise ConfigurationError(f"the base version {base.version} is newer than seen={seen!r}")
    return seen or 0


def transaction_started(transaction: str) -> dt.datetime | None:
    """When a transaction began, from the time stamp in its name; None if it has none."""
    match = _STAMP.match(transaction)
    if match is None:
        return None
    try:
        return dt.datetime.strptime(match[1], STAMP_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def conflict_error(
    url: str, kept_in: str, number: int, transaction: str, mode: str, base: VersionInfo | None
) -> VersionConflictError:
    """The error of a commit that lost version ``number`` to another writer, with the call that commits it anew.

    Args:
        url: the shard set's root.
        kept_in: where the transaction's shards stay.
        number: the version number the other writer took.
        transaction: the losing transaction.
        mode: its mode.
        base: the version it was built on.
    """
    on_top = (base.version if base else 0) == number - 1
    retry = (
        f"ShardSet.commit({transaction!r}, {mode!r})"
        if on_top
        else f"ShardSet.commit({transaction!r}, {mode!r}, parent={base.version if base else None}, seen={number})"
    )
    return VersionConflictError(
        f"{url}: version {number} was committed by another writer first. Nothing was published; "
        f"this transaction's shards are kept in {kept_in}: call {retry} to commit them as a newer version"
    )
