"""Type rules shared by ``dataframe_to_mds`` and ``table_to_mds``: Arrow type -> MDS encoding.

Planning happens once per conversion (on the Spark driver) and yields one ``ColumnPlan`` per column;
the encoders in ``mds_core.convert.arrow`` then follow the plan for every record batch. Spark types
reach these rules through their Arrow form (``mds_core.convert.spark`` maps them), so the two converters can
not drift apart. The "Type mapping" table of docs/spark.md lists the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from mds_core.errors import ConversionError, UnknownEncodingError
from mds_core.format.encodings import get_coder

NUMBER_TYPES = {
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
}
# Pre-encoded bytes pass through every variable-size encoding unchanged (as in the reference),
# so a binary column may be declared as any of these.
BINARY_ENCODINGS = (
    "bytes",
    "pil",
    "jpeg",
    "png",
    "pkl",
    "jpeg_array",
    "jpegarray",
    "list[pil]",
    "list[jpeg]",
    "list[png]",
)
NULL_POLICIES = ("error", "skip", "fill")


@dataclass(frozen=True)
class ColumnPlan:
    """How one column is encoded: ``kind`` selects the encoder, ``encoding`` goes into the index.

    kinds: number, bool, date, timestamp, str, bytes, decimal, ndarray, vector, json.
    ``dtype`` is the numpy dtype name of numbers and array elements; ``ndim`` the array depth;
    ``shape`` the fixed per-row shape when the encoding declares one; ``guessed`` marks a shape
    taken from a first row, which the encoder verifies (a miss is reported, not raised as bad data).
    """

    name: str
    kind: str
    encoding: str
    dtype: str | None = None
    ndim: int = 0
    shape: tuple[int, ...] | None = None
    type_name: str = ""
    guessed: bool = False


def is_list(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is any of Arrow's list types (list, large list, fixed-size list)."""
    return bool(pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype))


def array_leaf(dtype: pa.DataType) -> tuple[pa.DataType, int]:
    """The element type under nested lists, and how many list levels lead to it."""
    depth = 0
    while is_list(dtype):
        dtype, depth = dtype.value_type, depth + 1
    return dtype, depth


def ndarray_dtype(leaf: pa.DataType) -> str | None:
    """The numpy dtype an array of ``leaf`` values is stored as (booleans as uint8), else None."""
    if pa.types.is_boolean(leaf):
        return "uint8"
    return NUMBER_TYPES.get(leaf)


def json_problem(dtype: pa.DataType, path: str) -> str | None:
    """Why a value of ``dtype`` cannot become JSON exactly (the offending field's path), else None."""
    if pa.types.is_dictionary(dtype):
        return json_problem(dtype.value_type, path)
    if (
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_null(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
    ):
        return None
    if is_list(dtype):
        return json_problem(dtype.value_type, f"{path}[]")
    if pa.types.is_struct(dtype):
        for field in dtype:
            problem = json_problem(field.type, f"{path}.{field.name}")
            if problem:
                return problem
        return None
    if pa.types.is_map(dtype):
        if not (pa.types.is_string(dtype.key_type) or pa.types.is_large_string(dtype.key_type)):
            return f"{path} has map keys of type {dtype.key_type} (JSON object keys are strings)"
        return json_problem(dtype.item_type, f"{path}{{}}")
    return f"{path} has type {dtype}, which JSON cannot hold exactly; cast it to a string first"


def infer_plan(name: str, dtype: pa.DataType, *, vector: bool = False, type_name: str = "") -> ColumnPlan:
    """The default encoding of a column of Arrow type ``dtype``; ConversionError if there is none."""
    type_name = type_name or str(dtype)
    if vector:
        return ColumnPlan(name, "vector", "ndarray:float64", "float64", 1, None, type_name)
    if pa.types.is_dictionary(dtype):  # pandas categoricals: stored as their values
        return infer_plan(name, dtype.value_type, type_name=type_name)
    if dtype in NUMBER_TYPES:
        return ColumnPlan(name, "number", NUMBER_TYPES[dtype], NUMBER_TYPES[dtype], type_name=type_name)
    simple = _simple_plan(dtype)
    if simple:
        kind, encoding, np_dtype = simple
        return ColumnPlan(name, kind, encoding, np_dtype, type_name=type_name)
    if is_list(dtype):
        leaf, depth = array_leaf(dtype)
        np_dtype = ndarray_dtype(leaf)
        if np_dtype:
            return ColumnPlan(name, "ndarray", f"ndarray:{np_dtype}", np_dtype, depth, None, type_name)
    if is_list(dtype) or pa.types.is_struct(dtype) or pa.types.is_map(dtype):
        problem = json_problem(dtype, name)
        if problem is None:
            return ColumnPlan(name, "json", "json", type_name=type_name)
        raise ConversionError(f"column {name!r} ({type_name}) cannot be stored as JSON: {problem}")
    raise ConversionError(
        f"column {name!r} has type {type_name}, which has no MDS encoding; cast it (e.g. to a string) or drop it"
    )


def _simple_plan(dtype: pa.DataType) -> tuple[str, str, str | None] | None:
    if pa.types.is_boolean(dtype):
        return "bool", "uint8", "uint8"
    if pa.types.is_date(dtype):
        return "date", "int32", "int32"
    if pa.types.is_timestamp(dtype):
        return "timestamp", "int64", "int64"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "str", "str", None
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "bytes", "bytes", None
    if pa.types.is_decimal(dtype):
        return "decimal", "str_decimal", None
    return None


def declared_plan(inferred: ColumnPlan, encoding: str) -> ColumnPlan:
    """The plan for a user-declared encoding, validated against the column's type."""
    name, where = inferred.name, f"column {inferred.name!r} ({inferred.type_name})"
    try:
        coder = get_coder(encoding)
    except UnknownEncodingError as err:
        raise ConversionError(f"{where}: {err}") from err
    if encoding == inferred.encoding:
        return inferred
    if inferred.kind in ("ndarray", "vector") and encoding.startswith("ndarray:"):
        return _declared_array(inferred, coder, encoding, where)
    if inferred.kind == "bytes" and encoding in BINARY_ENCODINGS:
        return ColumnPlan(name, "bytes", encoding, type_name=inferred.type_name)
    if encoding == "json" and inferred.kind in ("number", "bool", "str", "ndarray", "json"):
        return ColumnPlan(name, "json", "json", type_name=inferred.type_name)
    raise ConversionError(f"{where} cannot be written as {encoding!r}; accepted: {accepted_encodings(inferred)}")


def _declared_array(inferred: ColumnPlan, coder: object, encoding: str, where: str) -> ColumnPlan:
    dtype, shape = getattr(coder, "dtype", None), getattr(coder, "shape", None)
    if dtype is None or dtype.name != inferred.dtype:
        raise ConversionError(
            f"{where} holds {inferred.dtype} values and cannot be written as {encoding!r}; "
            f"use 'ndarray:{inferred.dtype}' or 'ndarray:{inferred.dtype}:<shape>'"
        )
    if shape is not None and len(shape) != inferred.ndim:
        raise ConversionError(
            f"{where} is {inferred.ndim}-dimensional but {encoding!r} declares {len(shape)} dimensions"
        )
    return ColumnPlan(inferred.name, inferred.kind, encoding, inferred.dtype, inferred.ndim, shape, inferred.type_name)


def accepted_encodings(plan: ColumnPlan) -> list[str]:
    """The encodings a column with this plan may be given explicitly."""
    if plan.kind in ("ndarray", "vector"):
        return [f"ndarray:{plan.dtype}", f"ndarray:{plan.dtype}:<shape>"] + (["json"] if plan.kind == "ndarray" else [])
    if plan.kind == "bytes":
        return list(BINARY_ENCODINGS)
    return [plan.encoding] + (["json"] if plan.kind in ("number", "bool", "str", "json") else [])


def with_shape(plan: ColumnPlan, shape: tuple[int, ...], guessed: bool = False) -> ColumnPlan:
    """The fixed-shape form of an ndarray column whose every row has ``shape``."""
    return ColumnPlan(
        plan.name,
        plan.kind,
        f"ndarray:{plan.dtype}:{','.join(map(str, shape))}",
        plan.dtype,
        plan.ndim,
        shape,
        plan.type_name,
        guessed,
    )


def plan_columns(
    schema: pa.Schema,
    columns: dict[str, str] | None = None,
    *,
    vectors: frozenset[str] = frozenset(),
    type_names: dict[str, str] | None = None,
) -> list[ColumnPlan]:
    """One plan per written column: every column of ``schema``, or only the declared ``columns``."""
    type_names = type_names or {}
    names = schema.names
    if len(set(names)) != len(names):
        raise ConversionError(f"duplicate column names {sorted(n for n in set(names) if names.count(n) > 1)}")
    if columns is not None:
        _check_declared(columns, names)
    chosen = list(columns) if columns is not None else names
    plans = []
    for name in chosen:
        dtype = schema.field(name).type
        inferred = infer_plan(name, dtype, vector=name in vectors, type_name=type_names.get(name, ""))
        plans.append(inferred if columns is None else declared_plan(inferred, columns[name]))
    return plans


def _check_declared(columns: dict[str, str], names: list[str]) -> None:
    if not isinstance(columns, dict) or not columns:
        raise ConversionError("columns must be a non-empty dict of column name -> encoding")
    missing = [name for name in columns if name not in names]
    if missing:
        raise ConversionError(f"columns {missing} are not in the data; its columns are {names}")
    bad = [name for name, enc in columns.items() if not isinstance(enc, str)]
    if bad:
        raise ConversionError(f"the encodings of columns {bad} must be strings such as 'int32' or 'str'")


def check_null_policy(null_policy: str, fill_values: dict[str, object] | None) -> None:
    """Refuse an unknown ``null_policy``, or ``fill_values`` without ``null_policy='fill'``."""
    if null_policy not in NULL_POLICIES:
        raise ConversionError(f"null_policy must be one of {list(NULL_POLICIES)}, got {null_policy!r}")
    if fill_values and null_policy != "fill":
        raise ConversionError("fill_values is used only with null_policy='fill'")
