"""The publication history in ``published.json``: which versions were published before, for ``rollback()``.

``history`` lists the versions published before the current one, oldest first (at most
``HISTORY_LIMIT``). Publishing pushes the version it replaces; rolling back pops, so rolling back
twice goes two publications back rather than toggling between the last two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from mds_core.errors import InvalidManifestError
from mds_core.storage.remote import RemoteStore
from mds_core.versions.head import read_if_present
from mds_core.versions.manifest import HISTORY_LIMIT, PUBLISHED, Published, parse_published

T = TypeVar("T")


def published_record(store: RemoteStore) -> Published | None:
    """``published.json``, or None if absent or damaged (publishing rewrites it whole)."""
    data = read_if_present(store, PUBLISHED)
    try:
        return parse_published(data, store.url_of(PUBLISHED)) if data is not None else None
    except InvalidManifestError:
        return None


def pushed(record: Published | None, number: int) -> list[int]:
    """The history to record when ``number`` replaces the publication that ``record`` describes."""
    if record is None:
        return []
    history = list(record["history"])
    if record["version"] != number:
        history.append(record["version"])
    return history[-HISTORY_LIMIT:]


def history_before(record: Published | None, current: int | None) -> list[int]:
    """The versions published before ``current`` (the root index's).

    ``record`` may lag behind it: a publish that died between its two writes updated the root index but not
    ``published.json``.
    """
    if record is None:
        return []
    history = list(record["history"])
    if current is None or record["version"] == current:
        return history
    if current in history:  # an interrupted rollback to ``current``: what it would have recorded
        return history[: len(history) - 1 - history[::-1].index(current)]
    return (history + [record["version"]])[-HISTORY_LIMIT:]  # an interrupted publish of ``current``


def rollback_target(
    history: list[int], current: int | None, lookup: Callable[[int], T | None]
) -> tuple[T, list[int]] | None:
    """The most recent earlier publication that still exists, and the history left once it is published again.

    ``lookup`` finds a publication, or None once vacuumed; the result is None when there is no such one.
    """
    for position in range(len(history) - 1, -1, -1):
        if history[position] == current:
            continue
        found = lookup(history[position])
        if found is not None:
            return found, history[:position]
    return None
