"""Tables to MDS.

``table_to_mds`` (pyarrow, pandas or dicts; no Spark) and, in ``mds_core.convert.spark``, ``dataframe_to_mds`` (Spark
DataFrames, written from the executors). Both follow one set of type rules (``type_rules``), encode Arrow record batches
column-wise (``arrow``) and apply one null policy (``nulls``).
"""

try:
    import pyarrow  # noqa: F401  (every converter encodes Arrow batches)
except ImportError as err:
    from mds_core.errors import MissingDependencyError

    raise MissingDependencyError(
        "mds_core.convert needs pyarrow: pip install 'mds-pipelines[arrow]' (or '[spark]' for dataframe_to_mds)"
    ) from err

from mds_core.convert.table import ConversionStats, table_to_mds

__all__ = ["ConversionStats", "table_to_mds"]
