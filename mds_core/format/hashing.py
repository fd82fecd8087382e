"""Hash algorithms by name: hashlib's (except ``shake_*``) plus xxhash's, as hex digests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

import xxhash

from mds_core.errors import HashAlgorithmError


def get_hashes() -> set[str]:
    """Every supported algorithm name."""
    stdlib = {name for name in hashlib.algorithms_available if hasattr(hashlib, name) and not name.startswith("shake_")}
    return stdlib | set(xxhash.algorithms_available)


class Hasher(Protocol):
    """An incremental hash object, as hashlib's and xxhash's constructors make."""

    def update(self, data: bytes | memoryview, /) -> None:
        """Add ``data`` to the hash."""

    def hexdigest(self) -> str:
        """The hash of everything added, in hex."""


def hasher(algo: str) -> Callable[[], Hasher]:
    """A constructor for an incremental hash object (``update`` / ``hexdigest``)."""
    # getattr finds the constructor by name; the annotation says what every one of them makes.
    constructor: Callable[[], Hasher]
    if algo in xxhash.algorithms_available:
        constructor = getattr(xxhash, algo)
        return constructor
    if algo in get_hashes():
        constructor = getattr(hashlib, algo)
        return constructor
    raise HashAlgorithmError(f"unknown hash algorithm {algo!r}; supported: {', '.join(sorted(get_hashes()))}")


def get_hash(algo: str, data: bytes) -> str:
    """``algo``'s lowercase hex digest of ``data``."""
    digest = hasher(algo)()
    digest.update(data)
    return digest.hexdigest()


def digests(algos: list[str], parts: Sequence[bytes | memoryview]) -> dict[str, str]:
    """Each algorithm's hex digest of the concatenation of ``parts``."""
    result = {}
    for algo in algos:
        digest = hasher(algo)()
        for part in parts:
            digest.update(part)
        result[algo] = digest.hexdigest()
    return result


def check_hash_list(hashes: list[str] | None) -> list[str]:
    """Validate a writer's ``hashes``: known, sorted and unique, as the reference requires."""
    hashes = list(hashes or [])
    for algo in hashes:
        hasher(algo)
    if hashes != sorted(set(hashes)):
        raise HashAlgorithmError(f"hashes must be sorted and unique, got {hashes}; use {sorted(set(hashes))}")
    return hashes
