"""Create a file only if it does not exist yet, on every store that can promise it.

A shard-set commit is safe with concurrent writers only if creating its manifest is exclusive:
of two writers creating the same name, exactly one succeeds and the other learns it lost. Each
store gets that promise differently (its ``exclusive_create`` in the registry, ``stores.py``), and
some cannot give it at all; those are refused rather than allowed to let two commits both "win".
"""

from __future__ import annotations

from typing import Any

from mds_core.errors import ConfigurationError
from mds_core.storage import stores


class ExclusiveCreateUnsupported(ConfigurationError):
    """A store that cannot create a file exclusively, so concurrent commits could both succeed."""


def supports_exclusive_create(scheme: str) -> bool:
    """Whether the store behind ``scheme`` can create a file only if it is missing."""
    kind = stores.kind_of_scheme(scheme)
    return kind is not None and kind.exclusive_create is not None


def require_exclusive_create(scheme: str, url: str) -> None:
    """Refuse, before anything is written, a store on which concurrent commits could both succeed."""
    _exclusive_create(scheme, url)


def create_if_absent(fs: Any, scheme: str, path: str, data: bytes, url: str) -> bool:
    """Create ``path`` holding ``data``; False if it already existed. One attempt, no retries.

    Raises ``ExclusiveCreateUnsupported`` for a store that cannot make the create exclusive.
    """
    return _exclusive_create(scheme, url).create(fs, path, data)


def _exclusive_create(scheme: str, url: str) -> stores.ExclusiveCreate:
    kind = stores.kind_of_scheme(scheme)
    if kind is None or kind.exclusive_create is None:
        able = [s for s in stores.remote_schemes() if supports_exclusive_create(s)]
        raise ExclusiveCreateUnsupported(
            f"{url}: {scheme}:// cannot create a file exclusively, so two writers committing at once could "
            f"both succeed. Keep versioned shard sets on a store that can "
            f"({', '.join(s + '://' for s in able)} or a local path)."
        )
    return kind.exclusive_create
