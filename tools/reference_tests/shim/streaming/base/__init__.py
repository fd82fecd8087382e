"""``streaming.base``: the reference's main names, from mds_core."""

from streaming import (
    CSVWriter,
    JSONWriter,
    LocalDataset,
    MDSWriter,
    Stream,
    StreamingDataLoader,
    StreamingDataset,
    TSVWriter,
    XSVWriter,
)

__all__ = [
    "CSVWriter",
    "JSONWriter",
    "LocalDataset",
    "MDSWriter",
    "Stream",
    "StreamingDataLoader",
    "StreamingDataset",
    "TSVWriter",
    "XSVWriter",
]
