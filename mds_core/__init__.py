"""mds_core: read and write MDS (Mosaic Data Shard) datasets, byte-compatible with Mosaic Streaming.

Training code moves over by changing one import::

    from mds_core import MDSWriter, LocalDataset
"""

from mds_core.errors import MDSError
from mds_core.local import LocalDataset
from mds_core.merge import merge_index
from mds_core.writer import MDSWriter

__all__ = ["LocalDataset", "MDSError", "MDSWriter", "merge_index"]
__version__ = "0.1.0"
