"""``streaming.base.partition``."""

from mds_core.order import get_partitions

__all__ = ["get_partitions"]
