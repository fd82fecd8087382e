"""``streaming.base.converters``."""

from mds_core import dataframe_to_mds

__all__ = ["dataframe_to_mds"]
