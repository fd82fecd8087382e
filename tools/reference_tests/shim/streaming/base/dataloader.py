"""``streaming.base.dataloader``."""

from mds_core import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
