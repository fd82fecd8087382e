"""``streaming.base.local``."""

from mds_core import LocalDataset

__all__ = ["LocalDataset"]
