"""Converting only what an ``IncrementalPlan`` names, and the source-lineage record a shard set keeps.

``convert_added_files`` reads the data files append-only commits added, and nothing else, through delta-rs's
log's filesystem (fsspec, from the table's storage options): an appended file carries no deletion vector, so its rows are
exactly the rows the commit added. Partition columns, which Delta keeps in the log and not in the files, are
filled from each file's partition values. ``convert_partitions`` reads whole partitions at a version through
``delta_to_mds`` with a predicate on the partition columns, deletion vectors applied.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from mds_core.convert.delta import DeltaConversion, delta_to_mds, open_delta_table
from mds_core.convert.delta_changes import AddedFile, Partition, partition_predicate
from mds_core.convert.delta_log import LOG, log_filesystem
from mds_core.convert.table import table_to_mds
from mds_core.errors import DeltaTableError
from mds_core.storage.urls import redact


def convert_added_files(
    table_uri: str | os.PathLike[str],
    files: Sequence[AddedFile],
    out: str | os.PathLike[str] | tuple[str, str],
    columns: dict[str, str] | None = None,
    *,
    version: int,
    storage_options: dict[str, str] | None = None,
    **table_kwargs: Any,
) -> DeltaConversion:
    """Convert the rows of ``files`` (from an ``IncrementalPlan``), and only those, to an MDS dataset at ``out``.

    Args:
        table_uri: the table's root (a local path or a URL).
        files: the added files, as ``plan_increment`` lists them.
        out: a local directory, a URL, or ``(local, remote)``, as ``MDSWriter`` takes it.
        columns: column -> encoding, as for ``table_to_mds``; None for every column.
        version: the plan's ``to_version``: the table's schema is read there.
        storage_options: delta-rs's object store options.
        **table_kwargs: further ``table_to_mds`` arguments (``null_policy``, ``compression``...).

    Raises:
        DeltaTableError: the table maps column names (its files' names are not the schema's), or a file is gone.
    """
    table = open_delta_table(table_uri, version=version, storage_options=storage_options)
    uri = table.table_uri
    if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
        raise DeltaTableError(f"{uri} maps its column names: convert its changes with convert_partitions or whole")
    schema = pa.schema(table.schema().to_arrow())
    if columns:
        schema = pa.schema([schema.field(name) for name in columns if name in schema.names])
    filesystem, log = log_filesystem(uri, storage_options)
    root = log.removesuffix(f"/{LOG}")
    batches = pa.RecordBatchReader.from_batches(schema, _file_batches(filesystem, root, files, schema, uri))
    stats = table_to_mds(batches, out, columns, **table_kwargs)
    return DeltaConversion(stats, uri, table.version(), str(table.metadata().id))


def _file_batches(
    filesystem: Any, root: str, files: Sequence[AddedFile], schema: pa.Schema, uri: str
) -> Iterator[pa.RecordBatch]:
    """Each file's batches in ``schema``, its partition columns filled from its partition values."""
    import pyarrow.parquet as pq

    for file in files:
        try:
            # The log's paths are relative URIs (percent-encoded); an absolute one names its own store.
            path = file.path if "://" in file.path else f"{root}/{unquote(file.path)}"
            parquet = pq.ParquetFile(path, filesystem=None if "://" in file.path else filesystem)
            stored = [name for name in schema.names if name in parquet.schema_arrow.names]
            for batch in parquet.iter_batches(columns=stored):
                yield _in_schema(batch, file, schema)
        except (OSError, ValueError, pa.ArrowException) as err:
            raise DeltaTableError(
                f"reading {file.path} of {uri} (added in version {file.version}) failed: {err}"
            ) from err


def _in_schema(batch: pa.RecordBatch, file: AddedFile, schema: pa.Schema) -> pa.RecordBatch:
    arrays = []
    for field in schema:
        if field.name in batch.schema.names:
            arrays.append(batch.column(field.name).cast(field.type))
        elif field.name in file.partition_values:
            value = pa.array([file.partition_values[field.name]] * batch.num_rows, pa.string())
            arrays.append(value.cast(field.type))
        else:  # a column the file predates: null, for the null policy to decide
            arrays.append(pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def convert_partitions(
    table_uri: str | os.PathLike[str],
    partitions: list[Partition],
    out: str | os.PathLike[str] | tuple[str, str],
    columns: dict[str, str] | None = None,
    *,
    version: int,
    storage_options: dict[str, str] | None = None,
    **table_kwargs: Any,
) -> DeltaConversion:
    """Convert the rows of ``partitions`` at ``version`` (deletion vectors applied) to an MDS dataset at ``out``.

    Args:
        table_uri: the table's root (a local path or a URL).
        partitions: partition column -> value, as an ``IncrementalPlan``'s ``touched_partitions`` lists them.
        out: a local directory, a URL, or ``(local, remote)``.
        columns: column -> encoding, as for ``table_to_mds``; None for every column.
        version: the table version to read (the plan's ``to_version``).
        storage_options: delta-rs's object store options.
        **table_kwargs: further ``table_to_mds`` arguments.
    """
    predicate = partition_predicate(partitions)
    return delta_to_mds(
        table_uri, out, columns, version=version, storage_options=storage_options, predicate=predicate, **table_kwargs
    )


def delta_lineage(
    conversion: DeltaConversion, *, first_version: int | None = None, uc_name: str | None = None
) -> dict[str, Any]:
    """The source-lineage record a shard-set version keeps (``ShardSet.commit(..., lineage=...)``).

    ``{"source": {"kind": "delta", "table_uri", "table_id", "versions": [first, last]}}``, plus ``"uc_name"``
    when the table was named in Unity Catalog. The URI is redacted (no credentials).

    Args:
        conversion: what ``delta_to_mds`` (or an incremental conversion) returned.
        first_version: the first table version the shard-set version covers; None: the conversion's own.
        uc_name: the table's Unity Catalog name (``catalog.schema.table``), when it was resolved from one.
    """
    first = conversion.version if first_version is None else first_version
    source: dict[str, Any] = {"kind": "delta", "table_uri": redact(conversion.table_uri.rstrip("/"))}
    if uc_name is not None:
        source["uc_name"] = uc_name
    source |= {"table_id": conversion.table_id, "versions": [first, conversion.version]}
    return {"source": source}
