"""``streaming.base.format``: the MDS writer (the other formats are not offered)."""

from streaming import CSVWriter, JSONWriter, MDSWriter, TSVWriter, XSVWriter

__all__ = ["CSVWriter", "JSONWriter", "MDSWriter", "TSVWriter", "XSVWriter"]
