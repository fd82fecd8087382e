"""``streaming.base.sampling``."""

from mds_core.order import get_sampling

__all__ = ["get_sampling"]
