"""Dagster's standard metadata keys, so the UI's catalog shows row counts, columns and locations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from dagster import MaterializeResult, MetadataValue, TableColumn, TableSchema

from mds_core.storage.urls import redact

# What an asset returns: a MaterializeResult with metadata and no value. Dagster reads an @asset's
# return annotation at runtime and, for an asset with several outputs (check specs), recognises only
# the bare class, so the annotation stays the bare class at runtime; type checkers see its parameter.
if TYPE_CHECKING:
    Materialized: TypeAlias = MaterializeResult[None]
else:
    Materialized = MaterializeResult


def column_schema(columns: Iterable[tuple[str, str]]) -> TableSchema:
    """A Dagster table schema of (name, type) columns."""
    return TableSchema(columns=[TableColumn(name, str(kind)) for name, kind in columns])


def standard_metadata(rows: int, uri: str, columns: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The table metadata Dagster shows: ``dagster/row_count``, ``dagster/uri`` and ``dagster/column_schema``.

    The URI is without the credentials a URL may carry; the schema lists (name, type).
    """
    return {
        "dagster/row_count": MetadataValue.int(int(rows)),
        "dagster/uri": MetadataValue.text(redact(uri)),
        "dagster/column_schema": MetadataValue.table_schema(column_schema(columns)),
    }
