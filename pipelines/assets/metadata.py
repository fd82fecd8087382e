"""Dagster's standard metadata keys, so the UI's catalog shows row counts, columns and locations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dagster import MetadataValue, TableColumn, TableSchema


def column_schema(columns: Iterable[tuple[str, str]]) -> TableSchema:
    return TableSchema(columns=[TableColumn(name, str(kind)) for name, kind in columns])


def standard_metadata(rows: int, uri: str, columns: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``dagster/row_count``, ``dagster/uri`` and ``dagster/column_schema`` (name, type)."""
    return {
        "dagster/row_count": MetadataValue.int(int(rows)),
        "dagster/uri": MetadataValue.text(uri),
        "dagster/column_schema": MetadataValue.table_schema(column_schema(columns)),
    }
