"""``streaming.base.dataset``."""

from mds_core import StreamingDataset

__all__ = ["StreamingDataset"]
