"""Writing MDS datasets.

``MDSWriter`` (encode in the caller's thread, compress, hash and store in the background) and ``merge_index`` (one index
over several written datasets).
"""

from mds_core.writer.mds_writer import MDSWriter
from mds_core.writer.merge import merge_index

__all__ = ["MDSWriter", "merge_index"]
