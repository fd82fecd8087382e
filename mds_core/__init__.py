"""mds_core: read and write MDS (Mosaic Data Shard) datasets, byte-compatible with Mosaic Streaming.

Training code moves over by changing one import::

    from mds_core import MDSWriter, LocalDataset, StreamingDataset, StreamingDataLoader
"""

from typing import TYPE_CHECKING

from mds_core.errors import MDSError
from mds_core.streaming.local import LocalDataset

if TYPE_CHECKING:  # the lazy names below, typed for their callers
    from mds_core.convert.delta import delta_to_mds
    from mds_core.convert.spark import dataframe_to_mds
    from mds_core.order.schedule import Phase, Schedule
    from mds_core.streaming.dataset import StreamingDataset
    from mds_core.streaming.loader import StreamingDataLoader
    from mds_core.streaming.registry import streams_registry
    from mds_core.streaming.stream import Stream
    from mds_core.writer import MDSWriter, merge_index

__all__ = [
    "LocalDataset",
    "MDSError",
    "MDSWriter",
    "Phase",
    "Schedule",
    "Stream",
    "StreamingDataLoader",
    "StreamingDataset",
    "dataframe_to_mds",
    "delta_to_mds",
    "merge_index",
    "streams_registry",
]

# Loaded on first use: StreamingDataLoader imports torch (seconds), the dataset modules pull in the
# order machinery, dataframe_to_mds pyarrow and pyspark, delta_to_mds deltalake: none of which plain readers and
# writers need; the writer (7 ms), which readers do not need.
_LAZY = {
    "MDSWriter": "mds_core.writer",
    "merge_index": "mds_core.writer",
    "Phase": "mds_core.order.schedule",
    "Schedule": "mds_core.order.schedule",
    "Stream": "mds_core.streaming.stream",
    "StreamingDataset": "mds_core.streaming.dataset",
    "StreamingDataLoader": "mds_core.streaming.loader",
    "streams_registry": "mds_core.streaming.registry",
    "dataframe_to_mds": "mds_core.convert.spark",
    "delta_to_mds": "mds_core.convert.delta",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mds_core' has no attribute {name!r}")
