"""Delta tables to MDS without Spark, through delta-rs (the ``deltalake`` package).

``delta_to_mds`` opens a Delta table at a version or a timestamp, streams its rows with delta-rs's scan (which
applies deletion vectors and column mapping) and hands the record batches to ``table_to_mds``, so the type rules,
null policy and writer settings are those of every other converter. It returns the statistics with the table's
resolved version and id: what a shard-set version needs to record where its rows came from.

delta-rs refuses, when it loads the log, a table whose protocol names a reader feature it cannot honour (type
widening, vacuum protocol check, catalog-managed commits, an unknown name): reading such a table with a
reader that ignores the feature would return wrong rows. The refusal becomes an ``UnsupportedDeltaFeatureError``
naming the feature and the table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mds_core.convert.table import ConversionStats, table_to_mds
from mds_core.errors import (
    DeltaTableError,
    DeltaTableNotFoundError,
    MissingDependencyError,
    UnsupportedDeltaFeatureError,
)
from mds_core.storage.unity_catalog import expired_credentials_named, in_unity_catalog, resolve_location

if TYPE_CHECKING:
    from deltalake import DeltaTable

INSTALL_HINT = "pip install 'mds-pipelines[delta]'"

# The reader features delta-rs's scan honours (deltalake 1.6; tests/delta reads a table with each of the first
# three). Anything else in a table's protocol is refused before a row is read.
HONOURED_READER_FEATURES = frozenset(
    {"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint", "variantType", "variantType-preview"}
)

# How delta-rs words a refused reader feature when it loads or scans a table (deltalake 1.6).
_FEATURE_PATTERNS = (
    re.compile(r"Feature '([^']+)' is not supported"),
    re.compile(r"Unsupported table features required: \[([^\]]*)\]"),
)


@dataclass(frozen=True)
class DeltaConversion:
    """What ``delta_to_mds`` wrote, and exactly which table version it read.

    Attributes:
        stats: rows, shards, bytes and time, as ``table_to_mds`` reports them.
        table_uri: the table's URI as delta-rs resolved it (``file:///...`` for a local path).
        version: the table version read: the one asked for, the one current at ``timestamp``, or the latest.
        table_id: the table's id (its ``metaData`` action's ``id``), which stays the same across versions.
        uc_name: the Unity Catalog name the table was read by (``catalog.schema.table``); None for a path or URL.
        schema: the table's schema at ``version``, as its ``metaData`` action writes it (JSON): a later incremental
            run reads its appended files in this schema without loading the log (``convert_added_files``).
    """

    stats: ConversionStats
    table_uri: str
    version: int
    table_id: str
    uc_name: str | None = None
    schema: str = ""


def delta_to_mds(
    table_uri: str | os.PathLike[str],
    out: str | os.PathLike[str] | tuple[str, str],
    columns: dict[str, str] | None = None,
    *,
    version: int | None = None,
    timestamp: str | datetime | None = None,
    storage_options: dict[str, str] | None = None,
    predicate: str | None = None,
    workspace: dict[str, Any] | None = None,
    **table_kwargs: Any,
) -> DeltaConversion:
    """Convert one version of a Delta table to an MDS dataset at ``out``, a record batch at a time.

    Rows come in the order delta-rs's scan yields them, which Delta does not define; the set of rows is exactly
    the version's, with deleted rows (deletion vectors included) left out.

    Args:
        table_uri: the table's root: a local path, ``file://``, ``s3://``, ``gs://``, ``az://``/``abfss://``, or a
            folder in a Unity Catalog volume, ``dbfs:/Volumes/<catalog>/<schema>/<volume>/<folder>``; or a Unity
            Catalog name, ``catalog.schema.table`` or ``uc://catalog.schema.table`` (docs/delta.md).
        out: a local directory, a URL, or ``(local, remote)``, as ``MDSWriter`` takes it.
        columns: column -> encoding, as for ``table_to_mds``: only those columns are read from the table.
        version: the table version to read (Spark's ``versionAsOf``); None reads the latest.
        timestamp: read the version current at this time (Spark's ``timestampAsOf``): an ISO 8601 string or a
            datetime (naive means UTC). Exclusive with ``version``.
        storage_options: delta-rs's object store options (``AWS_ENDPOINT_URL``, ``AWS_REGION``...); None takes
            them from the environment.
        predicate: an SQL condition on the rows to keep (DataFusion syntax, e.g. ``"day >= '2026-01-01'"``);
            partition and file statistics skip the files that cannot match.
        workspace: for a Unity Catalog name, Databricks SDK ``Config`` fields (``host``, ``token``, ``profile``);
            None takes ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN`` or the SDK's other defaults.
        **table_kwargs: further ``table_to_mds`` arguments (``null_policy``, ``compression``, ``size_limit``...).

    Returns:
        The statistics, with the table's URI, resolved version and id.

    Raises:
        DeltaTableNotFoundError: no table at ``table_uri``, or no such version.
        UnsupportedDeltaFeatureError: the table needs a reader feature deltalake cannot honour.
        DeltaTableError: a bad timestamp, or data files of the version gone (vacuumed).
        UnityCatalogError: a Unity Catalog name that is malformed, missing, refused or not Delta (subclasses:
            ``UnityCatalogTableNotFoundError``, ``UnityCatalogPermissionError``,
            ``UnityCatalogCredentialsExpiredError``).
    """
    if version is not None and timestamp is not None:
        raise DeltaTableError(f"delta_to_mds takes version= or timestamp=, not both (table {table_uri})")
    uc_name, named, expires_at = None, None, None
    if in_unity_catalog(table_uri):  # its location, read with the credentials vended
        resolved = resolve_location(str(table_uri), storage_options=storage_options, workspace=workspace)
        uc_name, named, expires_at = resolved.uc_name, resolved.name, resolved.expires_at
        table_uri, storage_options = resolved.storage_location, resolved.storage_options
    with expired_credentials_named(named, expires_at):
        table = open_delta_table(table_uri, version=version, timestamp=timestamp, storage_options=storage_options)
        batches = delta_batches(table, list(columns) if columns else None, predicate)
        stats = table_to_mds(batches, out, columns, **table_kwargs)
    table_id, schema = str(table.metadata().id), table.schema().to_json()
    return DeltaConversion(stats, table.table_uri, table.version(), table_id, uc_name, schema)


def open_delta_table(
    table_uri: str | os.PathLike[str],
    *,
    version: int | None = None,
    timestamp: str | datetime | None = None,
    storage_options: dict[str, str] | None = None,
) -> DeltaTable:
    """The ``deltalake.DeltaTable`` at ``version`` or ``timestamp`` (else the latest), its errors made ``MDSError``.

    Args:
        table_uri: the table's root (a path or a URL).
        version: the version to load; None for the latest (or the one at ``timestamp``).
        timestamp: load the version current at this time (naive datetimes are UTC).
        storage_options: delta-rs's object store options.
    """
    deltalake = import_deltalake()
    uri = os.fspath(table_uri)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise DeltaTableError(f"a Delta table version is a whole number from 0, got {version!r} (table {uri})")
    try:
        table: DeltaTable = deltalake.DeltaTable(uri, version=version, storage_options=storage_options)
    except deltalake.exceptions.TableNotFoundError as err:
        raise DeltaTableNotFoundError(f"no Delta table at {uri}: {err}") from err
    except deltalake.exceptions.DeltaError as err:
        raise _load_error(err, uri, version, storage_options) from err
    except OSError as err:  # the store refused or failed the log's reads (keys, permissions, network)
        raise DeltaTableError(f"cannot read the Delta log of {uri}: {err}") from err
    if timestamp is not None:
        _load_at(table, uri, timestamp)
    check_reader_features(table, uri)
    return table


def check_reader_features(table: DeltaTable, uri: str) -> None:
    """Refuse ``table`` when its protocol names a reader feature outside ``HONOURED_READER_FEATURES``.

    Args:
        table: a loaded ``deltalake.DeltaTable``.
        uri: the table's URI, for the message.
    """
    refused = sorted(set(table.protocol().reader_features or ()) - HONOURED_READER_FEATURES)
    if refused:
        raise _unsupported(uri, refused, f"the protocol of version {table.version()}")


def _unsupported(uri: str, features: list[str], detail: str) -> UnsupportedDeltaFeatureError:
    return UnsupportedDeltaFeatureError(
        f"{uri} needs the reader feature(s) {', '.join(features)}, which deltalake "
        f"{import_deltalake().__version__} cannot honour: its rows would be read wrong, so it is refused ({detail})"
    )


def _load_at(table: DeltaTable, uri: str, timestamp: str | datetime) -> None:
    """Time-travel ``table`` to ``timestamp``, refusing a time before the table existed."""
    when = _as_utc(timestamp, uri)
    created = datetime.fromtimestamp(table.metadata().created_time / 1000, UTC)
    if when < created:
        raise DeltaTableError(
            f"{uri} was created at {created.isoformat()}, after the timestamp {when.isoformat()}: no version to read"
        )
    try:
        table.load_as_version(when)
    except Exception as err:  # delta-rs raises DeltaError or ValueError here
        raise DeltaTableError(f"cannot load {uri} as of {when.isoformat()}: {err}") from err


def _as_utc(timestamp: str | datetime, uri: str) -> datetime:
    """``timestamp`` as an aware datetime (naive ones and strings without an offset are UTC)."""
    if isinstance(timestamp, str):
        try:
            timestamp = datetime.fromisoformat(timestamp)
        except ValueError as err:
            raise DeltaTableError(f"timestamp {timestamp!r} for {uri} is not an ISO 8601 date and time") from err
    if not isinstance(timestamp, datetime):
        raise DeltaTableError(f"timestamp= takes a str or a datetime, got {type(timestamp).__name__} (table {uri})")
    return timestamp if timestamp.tzinfo is not None else timestamp.replace(tzinfo=UTC)


def _load_error(
    err: Exception, uri: str, version: int | None, storage_options: dict[str, str] | None
) -> DeltaTableError:
    """The ``MDSError`` for a table delta-rs could not load: an unsupported feature, a missing version, or other."""
    message = str(err)
    if features := _refused_features(message):
        return _unsupported(uri, features, message)
    if version is not None:
        latest = _latest_version(uri, storage_options)
        if latest is not None and version > latest:
            return DeltaTableNotFoundError(f"{uri} has no version {version}: its latest is {latest}")
    where = f" at version {version}" if version is not None else ""
    return DeltaTableError(f"cannot load the Delta table {uri}{where}: {message}")


def _refused_features(message: str) -> list[str]:
    """The reader features named in delta-rs's refusal ``message`` (none when it is another error)."""
    if "catalog-managed" in message:  # delta-rs does not name the feature here
        return ["catalogManaged"]
    for pattern in _FEATURE_PATTERNS:
        if found := pattern.search(message):
            return [_protocol_name(name.strip()) for name in found[1].split(",") if name.strip()]
    return []


def _protocol_name(name: str) -> str:
    """A feature as the protocol spells it: delta-rs names some by its enum (``TypeWideningPreview``)."""
    if name[:1].isupper():
        name = name[0].lower() + name[1:]
        name = name.removesuffix("Preview") + "-preview" if name.endswith("Preview") else name
    return name


def _latest_version(uri: str, storage_options: dict[str, str] | None) -> int | None:
    """The table's latest version, or None when even that cannot be loaded."""
    deltalake = import_deltalake()
    try:
        return int(deltalake.DeltaTable(uri, storage_options=storage_options).version())
    except deltalake.exceptions.DeltaError:
        return None


def delta_batches(table: DeltaTable, names: list[str] | None, predicate: str | None = None) -> pa.RecordBatchReader:
    """The rows of ``table``'s loaded version as a stream of record batches with plain Arrow types.

    delta-rs's scan applies deletion vectors and column mapping, and yields view types (``string_view``...);
    each batch is cast to the table's own Arrow schema (``string``, ``binary``, ``list``), which the converters
    take.

    Args:
        table: a loaded ``deltalake.DeltaTable``.
        names: the columns to read (those not in the table are left for ``table_to_mds`` to report); None for all.
        predicate: an SQL condition on the rows to keep.
    """
    schema = pa.schema(table.schema().to_arrow())
    if names is not None:
        schema = pa.schema([schema.field(name) for name in names if name in schema.names])
    uri, version = table.table_uri, table.version()
    try:
        scan = table.scan(columns=schema.names, predicate=predicate)
    except Exception as err:  # a bad predicate, or a feature refused: DeltaError or ValueError from delta-rs
        if features := _refused_features(str(err)):
            raise _unsupported(uri, features, str(err)) from err
        raise DeltaTableError(f"cannot scan {uri} at version {version}: {err}") from err
    return pa.RecordBatchReader.from_batches(
        schema, _cast_batches(pa.RecordBatchReader.from_stream(scan), schema, uri, version)
    )


def _cast_batches(reader: pa.RecordBatchReader, schema: pa.Schema, uri: str, version: int) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches cast to ``schema``; a failed read is a ``DeltaTableError`` naming the version."""
    try:
        for batch in reader:
            columns = [batch.column(field.name).cast(field.type) for field in schema]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
    except (pa.ArrowException, OSError) as err:
        gone = "not found" in str(err) or isinstance(err, FileNotFoundError)
        hint = ": a data file is gone (vacuumed, or deleted by hand)" if gone else ""
        raise DeltaTableError(f"reading {uri} at version {version} failed{hint} ({err})") from err


def import_deltalake() -> ModuleType:
    """The ``deltalake`` module, or a ``MissingDependencyError`` that names the extra to install."""
    try:
        import deltalake
        import deltalake.exceptions
    except ImportError as err:
        raise MissingDependencyError(f"delta_to_mds needs deltalake (delta-rs): {INSTALL_HINT}") from err
    return deltalake
