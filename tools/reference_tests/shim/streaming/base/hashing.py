"""``streaming.base.hashing``."""

from mds_core.format import get_hash, get_hashes

__all__ = ["get_hash", "get_hashes", "is_hash"]


def is_hash(algo: str) -> bool:
    return algo in get_hashes()
