"""``streaming.base.format.mds``."""

from mds_core import MDSWriter

__all__ = ["MDSWriter"]
