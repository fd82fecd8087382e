"""Converting only what an ``IncrementalPlan`` names, and the source-lineage record a shard set keeps.

``convert_added_files`` reads the data files append-only commits added, and nothing else, through the log's
filesystem (fsspec, from the table's storage options), in the schema the shard set recorded: an appended file
carries no deletion vector, so its rows are exactly the rows the commit added. Partition columns, which Delta keeps in the log and not in the files, are
filled from each file's partition values. ``convert_partitions`` reads whole partitions at a version through
``delta_to_mds`` with a predicate on the partition columns, deletion vectors applied.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from mds_core.convert.delta import DeltaConversion, delta_to_mds, import_deltalake
from mds_core.convert.delta_changes import AddedFile, Partition, partition_predicate
from mds_core.convert.delta_log import LOG, log_filesystem
from mds_core.convert.table import table_to_mds
from mds_core.errors import DeltaTableError
from mds_core.storage.urls import redact

# Every field of a table with column mapping carries its physical (file) name under this key.
_MAPPED_NAME = "delta.columnMapping.physicalName"


def convert_added_files(
    table_uri: str | os.PathLike[str],
    files: Sequence[AddedFile],
    out: str | os.PathLike[str] | tuple[str, str],
    columns: dict[str, str] | None = None,
    *,
    version: int,
    recorded: Mapping[str, Any],
    storage_options: dict[str, str] | None = None,
    **table_kwargs: Any,
) -> DeltaConversion:
    """Convert the rows of ``files`` (from an ``IncrementalPlan``), and only those, to an MDS dataset at ``out``.

    The log is not loaded: an append-only plan holds no ``metaData`` action (one would make it a rebuild), so the
    table's schema and id are those the shard set recorded at the plan's ``from_version``. A day's cost is the
    files it adds, whatever the log's length or the distance to its last checkpoint.

    Args:
        table_uri: the table's root (a local path or a URL).
        files: the added files, as ``plan_increment`` lists them.
        out: a local directory, a URL, or ``(local, remote)``, as ``MDSWriter`` takes it.
        columns: column -> encoding, as for ``table_to_mds``; None for every column.
        version: the plan's ``to_version``, which the result records.
        recorded: the source record of the shard set's newest version (``source_lineage``), as
            ``delta_lineage`` wrote it: its ``table_uri``, ``table_id`` and ``schema``.
        storage_options: the object store options (delta-rs's names: ``AWS_ENDPOINT_URL``, the keys...).
        **table_kwargs: further ``table_to_mds`` arguments (``null_policy``, ``compression``...).

    Raises:
        DeltaTableError: the record has no schema, the table maps column names (its files' names are not the
            schema's), or a file is gone.
    """
    uri = os.fspath(table_uri)
    schema = _recorded_schema(recorded, uri)
    if columns:
        schema = pa.schema([schema.field(name) for name in columns if name in schema.names])
    filesystem, log = log_filesystem(uri, storage_options)
    root = log.removesuffix(f"/{LOG}")
    batches = pa.RecordBatchReader.from_batches(schema, _file_batches(filesystem, root, files, schema, uri))
    stats = table_to_mds(batches, out, columns, **table_kwargs)
    return DeltaConversion(stats, recorded["table_uri"], version, recorded["table_id"], schema=recorded["schema"])


def _recorded_schema(recorded: Mapping[str, Any], uri: str) -> pa.Schema:
    """The Arrow schema of the Delta schema a shard set recorded, refusing a table that maps column names."""
    text = recorded.get("schema")
    if not text:
        raise DeltaTableError(
            f"the shard set's record of {uri} has no table schema (it was not written by delta_lineage): "
            "convert the table whole once (delta_to_mds), then its increments"
        )
    if _MAPPED_NAME in text:
        raise DeltaTableError(f"{uri} maps its column names: convert its changes with convert_partitions or whole")
    return pa.schema(import_deltalake().Schema.from_json(text).to_arrow())


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

    ``{"source": {"kind": "delta", "table_uri", "table_id", "versions": [first, last], "schema"}}``, plus
    ``"uc_name"`` when the table was named in Unity Catalog. ``schema`` is the table's Delta schema (JSON), which
    the next ``convert_added_files`` reads its files in. The URI is redacted (no credentials).

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
    if conversion.schema:
        source["schema"] = conversion.schema
    return {"source": source}
