"""mds_core: read and write MDS (Mosaic Data Shard) datasets, byte-compatible with Mosaic Streaming.

Training code moves over by changing one import::

    from mds_core import MDSWriter, LocalDataset
"""

from mds_core.errors import MDSError
from mds_core.streaming.local import LocalDataset
from mds_core.writer.merge import merge_index
from mds_core.writer.mds_writer import MDSWriter

__all__ = [
    "LocalDataset", "MDSError", "MDSWriter", "Stream", "StreamingDataLoader", "StreamingDataset", "merge_index",
]

# Loaded on first use: StreamingDataLoader imports torch (seconds), and the dataset modules pull in
# the order machinery, which plain readers and writers do not need.
_LAZY = {
    "Stream": "mds_core.streaming.stream",
    "StreamingDataset": "mds_core.streaming.dataset",
    "StreamingDataLoader": "mds_core.streaming.loader",
    "dataframe_to_mds": "mds_core.convert.spark",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mds_core' has no attribute {name!r}")
__version__ = "0.1.0"
