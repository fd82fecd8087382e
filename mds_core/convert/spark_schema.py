"""Spark schemas for the converter.

Their Arrow form (as ``mapInArrow`` delivers batches), ML vector columns, and the fixed shapes of array columns guessed
from the first row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mds_core.convert.spark_connect import functions_module
from mds_core.convert.type_rules import ColumnPlan, with_shape
from mds_core.errors import ConversionError


def spark_to_arrow(schema: Any) -> tuple[pa.Schema, frozenset[str], dict[str, str]]:
    """The Arrow form of a Spark schema (as ``mapInArrow`` delivers it), ML vector columns, type names."""
    fields, vectors = [], set()
    for spark_field in schema.fields:
        if _is_vector(spark_field.dataType):
            vectors.add(spark_field.name)
        fields.append(pa.field(spark_field.name, _arrow_type(spark_field.dataType)))
    names = {f.name: f.dataType.simpleString() for f in schema.fields}
    return pa.schema(fields), frozenset(vectors), names


def _is_vector(dtype: Any) -> bool:
    from pyspark.sql.types import UserDefinedType

    return isinstance(dtype, UserDefinedType) and type(dtype).__name__ == "VectorUDT"


def _arrow_type(dtype: Any) -> pa.DataType:
    from pyspark.sql import types as T

    simple = {
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.StringType: pa.string(),
        T.BinaryType: pa.binary(),
        T.BooleanType: pa.bool_(),
        T.DateType: pa.date32(),
        T.TimestampType: pa.timestamp("us", "UTC"),
        T.TimestampNTZType: pa.timestamp("us"),
        T.NullType: pa.null(),
    }
    for spark_type, arrow_type in simple.items():
        if isinstance(dtype, spark_type):
            return arrow_type
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, T.ArrayType):
        return pa.list_(_arrow_type(dtype.elementType))
    if isinstance(dtype, T.MapType):
        return pa.map_(_arrow_type(dtype.keyType), _arrow_type(dtype.valueType))
    if isinstance(dtype, T.StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType)) for f in dtype.fields])
    if isinstance(dtype, T.UserDefinedType):
        return _arrow_type(dtype.sqlType())
    return pa.month_day_nano_interval()  # intervals, variants...: rejected by the type rules


def detect_shapes(
    dataframe: Any, plans: list[ColumnPlan], columns: dict[str, str] | None, *, connect: bool
) -> list[ColumnPlan]:
    """Guess the fixed shape of inferred ndarray columns from the first row (one cheap ``first()``).

    Tasks verify every row against the guess and report a miss instead of failing; the driver then
    runs again with the dynamic-shape form (``_run_until_shapes_hold``). A full extra pass over the
    data to check the shapes first would cost as much as reading it. ``connect``: the DataFrame is a
    Spark Connect one (its columns are built with Connect's functions).
    """
    F = functions_module(connect=connect)

    # A declared encoding is used as given; only inferred ones get the fixed-shape form.
    todo = [p for p in plans if p.kind == "ndarray" and p.shape is None and columns is None]
    exprs = [F.lit(1).alias("present")]
    for i, plan in enumerate(todo):
        for level, (low, high) in enumerate(_level_sizes(F, F.col(f"`{plan.name}`"), plan.ndim)):
            exprs += [low.alias(f"lo_{i}_{level}"), high.alias(f"hi_{i}_{level}")]
    first = dataframe.select(*exprs).first()
    if first is None:
        raise ConversionError("dataframe is empty; there is nothing to convert")
    row = first.asDict()
    guessed = {}
    for i, plan in enumerate(todo):
        bounds = [(row[f"lo_{i}_{lv}"], row[f"hi_{i}_{lv}"]) for lv in range(plan.ndim)]
        if all(lo is not None and lo == hi and lo > 0 for lo, hi in bounds):
            guessed[plan.name] = tuple(int(lo) for lo, _ in bounds)
    return [with_shape(p, guessed[p.name], guessed=True) if p.name in guessed else p for p in plans]


def _level_sizes(F: Any, column: Any, ndim: int) -> list[tuple[Any, Any]]:
    """Per nesting level: expressions for the smallest and largest list length in a row."""
    size = F.when(column.isNotNull(), F.size(column))
    levels = [(size, size)]
    flat = column
    for _ in range(1, ndim):
        inner = F.transform(flat, lambda x: F.size(x))
        levels.append((F.array_min(inner), F.array_max(inner)))
        flat = F.flatten(flat)
    return levels
