"""``streaming.base.stream``: ``Stream`` and ``streams_registry``."""

from mds_core import Stream, streams_registry

__all__ = ["Stream", "streams_registry"]
