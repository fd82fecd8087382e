"""Encode Arrow record batches into MDS sample bytes, column by column.

Each column becomes one "piece" by a vectorised step (numpy casts, Arrow buffers reinterpreted,
lists laid out by their offsets): a ``(rows, width)`` uint8 array when every row has the same
width, else an Arrow ``large_binary`` array of per-row bytes. The pieces are then joined row-wise
in the MDS order (the u32 sizes of the variable-size columns, then every column's bytes, columns
sorted by name) into one buffer plus per-row sizes, with no Python object per row. The bytes equal
what ``Schema.encode`` produces for the same values (tests/test_convert.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from mds_core.convert.type_rules import ColumnPlan, is_list
from mds_core.errors import ConversionError
from mds_core.format.ndarray import _encode_shape


class ShapeGuessMissed(ConversionError):
    """A row whose shape differs from the one guessed for its column (the caller retries without it)."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


# A column's pieces ((rows, width) uint8 arrays or large_binary arrays), and its per-row sizes if variable.
Parts = tuple[list[Any], "np.ndarray | None"]
_NO_SEPARATOR = pa.scalar(b"", pa.large_binary())


def plain(arr: pa.Array) -> pa.Array:
    """Dictionary arrays decoded and fixed-size lists as plain lists, so encoders see one form."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    plain_type = _plain_type(arr.type)
    return arr if plain_type == arr.type else arr.cast(plain_type)


def _plain_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_fixed_size_list(dtype):
        return pa.list_(_plain_type(dtype.value_type))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        inner = _plain_type(dtype.value_type)
        return dtype if inner == dtype.value_type else pa.list_(inner)
    return dtype


def _fixed_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """The ``(rows, width)`` uint8 view of a C-contiguous array's rows."""
    return np.ascontiguousarray(values).view(np.uint8).reshape(-1, width)


def _sliced_bytes(data: np.ndarray, offsets: np.ndarray) -> pa.LargeBinaryArray:
    """``data[offsets[i]:offsets[i+1]]`` for every i, as Arrow binary over the same memory."""
    offsets = np.ascontiguousarray(offsets - offsets[0], np.int64)
    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def _binary_of(values: list[bytes]) -> pa.LargeBinaryArray:
    return pa.array(values, pa.large_binary())


def _numbers(arr: pa.Array, plan: ColumnPlan) -> Parts:
    dtype = np.dtype(plan.dtype).newbyteorder("<")
    values = arr.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return [_fixed_bytes(values, dtype.itemsize)], None


def _dates(arr: pa.Array, plan: ColumnPlan) -> Parts:
    if pa.types.is_date64(arr.type):
        arr = _exact_cast(arr, pa.date32(), plan, "whole days")
    return _numbers(arr.cast(pa.int32()), plan)


def _timestamps(arr: pa.Array, plan: ColumnPlan) -> Parts:
    micros = _exact_cast(arr, pa.timestamp("us", arr.type.tz), plan, "whole microseconds")
    return _numbers(micros.cast(pa.int64()), plan)


def _exact_cast(arr: pa.Array, dtype: pa.DataType, plan: ColumnPlan, unit: str) -> pa.Array:
    try:
        return arr.cast(dtype)
    except pa.ArrowInvalid:
        exact = pc.equal(arr.cast(dtype, safe=False).cast(arr.type), arr).to_numpy(zero_copy_only=False)
        row = int(np.argmin(exact))
        raise ConversionError(
            f"column {plan.name!r} row {row}: {arr[row]} is not in {unit}, so {plan.encoding!r} would lose "
            "precision; round the column first"
        ) from None


def _strings(arr: pa.Array, plan: ColumnPlan) -> Parts:
    binary = pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()
    return _binary(arr.view(binary) if arr.type != binary else arr, plan)


def _binary(arr: pa.Array, plan: ColumnPlan) -> Parts:
    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        data = np.frombuffer(arr.buffers()[1], np.uint8)[arr.offset * width : (arr.offset + len(arr)) * width]
        return [data.reshape(-1, width)], np.full(len(arr), width, np.int64)
    lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    return [arr.cast(pa.large_binary())], lengths


def _python_values(encode: Callable[[Any], bytes]) -> Callable[[pa.Array, ColumnPlan], Parts]:
    def encoder(arr: pa.Array, plan: ColumnPlan) -> Parts:
        values = [encode(v) for v in _to_python(arr)]
        return [_binary_of(values)], np.fromiter(map(len, values), np.int64, len(values))

    return encoder


def _to_python(arr: pa.Array) -> list[Any]:
    values = arr.to_pylist()
    return [_maps_as_dicts(v, arr.type) for v in values] if _has_map(arr.type) else values


def _has_map(dtype: pa.DataType) -> bool:
    if pa.types.is_map(dtype):
        return True
    if is_list(dtype):
        return _has_map(dtype.value_type)
    return pa.types.is_struct(dtype) and any(_has_map(f.type) for f in dtype)


def _maps_as_dicts(value: Any, dtype: pa.DataType) -> Any:
    """Arrow gives maps as lists of (key, value) pairs; JSON wants objects."""
    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: _maps_as_dicts(v, dtype.item_type) for k, v in value}
    if is_list(dtype):
        return [_maps_as_dicts(v, dtype.value_type) for v in value]
    if pa.types.is_struct(dtype):
        return {f.name: _maps_as_dicts(value[f.name], f.type) for f in dtype}
    return value


def _json_bytes(value: Any) -> bytes:
    # json.dumps with its defaults, as the reference's 'json' encoding writes.
    return json.dumps(value).encode("utf-8")


# ---- arrays ---------------------------------------------------------------------------------------


@dataclass
class ListLayout:
    """Where each row's elements lie in the flattened leaf values, and each row's shape."""

    leaf: pa.Array
    bounds: np.ndarray  # (n + 1,) positions in ``leaf``
    dims: np.ndarray  # (n, ndim) per-row shape
    ragged: np.ndarray  # (n,) bool: inner lists of one row differ in length
    inner_nulls: np.ndarray  # (n,) bool: a null inner list or null element


def list_layout(arr: pa.Array, ndim: int) -> ListLayout:
    """Each row's bounds, dimensions, raggedness and inner nulls in a list column of ``ndim`` levels."""
    n = len(arr)
    bounds = np.arange(n + 1, dtype=np.int64)
    dims = np.zeros((n, ndim), np.int64)
    ragged = np.zeros(n, bool)
    inner_nulls = np.zeros(n, bool)
    level = arr
    for depth in range(ndim):
        if depth:
            inner_nulls |= _nulls_in_ranges(level, bounds)
        offsets = np.asarray(level.offsets, np.int64)
        lengths = np.diff(offsets)
        dims[:, depth], bad = _row_lengths(lengths, bounds)
        ragged |= bad
        bounds = offsets[bounds]
        level = level.values
    inner_nulls |= _nulls_in_ranges(level, bounds)
    return ListLayout(level, bounds, dims, ragged, inner_nulls)


def _nulls_in_ranges(items: pa.Array, bounds: NDArray[np.int64]) -> NDArray[np.bool_]:
    if items.null_count == 0:
        return np.zeros(len(bounds) - 1, bool)
    cumulative: NDArray[np.int64] = np.concatenate([[0], np.cumsum(items.is_null().to_numpy(zero_copy_only=False))])
    return cumulative[bounds[1:]] > cumulative[bounds[:-1]]


def _row_lengths(lengths: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the length of its items (0 when it has none), and whether they differ."""
    starts, stops = bounds[:-1], bounds[1:]
    has = stops > starts
    out, bad = np.zeros(len(starts), np.int64), np.zeros(len(starts), bool)
    if has.any():
        window = lengths[starts[has][0] : stops[has][-1]]
        local = starts[has] - starts[has][0]
        out[has] = window[local]
        bad[has] = np.minimum.reduceat(window, local) != np.maximum.reduceat(window, local)
    return out, bad


def _ndarrays(arr: pa.Array, plan: ColumnPlan) -> Parts:
    layout = list_layout(arr, plan.ndim)
    check_shapes(layout, plan)
    return _array_parts(layout.leaf, layout.bounds, layout.dims, plan)


def check_shapes(layout: ListLayout, plan: ColumnPlan, first_row: int = 0) -> None:
    """Rectangular rows, and the declared shape when there is one: else name the first bad row."""
    if layout.ragged.any():
        row = int(np.argmax(layout.ragged))
        raise ConversionError(
            f"column {plan.name!r} row {first_row + row}: nested array is ragged (its inner lists differ in "
            f"length); a {plan.ndim}-dimensional ndarray needs rectangular rows"
        )
    if plan.shape is not None:
        wrong = np.any(layout.dims != np.asarray(plan.shape), axis=1)
        if wrong.any():
            row = int(np.argmax(wrong))
            message = (
                f"column {plan.name!r} row {first_row + row}: array of shape "
                f"{tuple(layout.dims[row].tolist())} does not match the declared {plan.encoding!r}"
            )
            if plan.guessed:
                raise ShapeGuessMissed(plan.name, message)
            raise ConversionError(message)


def _array_parts(leaf: pa.Array, bounds: np.ndarray, dims: np.ndarray, plan: ColumnPlan) -> Parts:
    dtype = np.dtype(plan.dtype).newbyteorder("<")
    leaf = leaf.slice(int(bounds[0]), int(bounds[-1] - bounds[0]))
    values = leaf.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if plan.shape is not None:
        return [_fixed_bytes(values, int(np.prod(plan.shape)) * dtype.itemsize)], None
    data = _sliced_bytes(values.view(np.uint8), (bounds - bounds[0]) * dtype.itemsize)
    heads = _shape_heads(dims)
    sizes = np.diff(bounds) * dtype.itemsize + np.fromiter(map(len, heads), np.int64, len(heads))
    return [_binary_of(heads), data], sizes


def _shape_heads(dims: np.ndarray) -> list[bytes]:
    cache: dict[tuple[int, ...], bytes] = {}
    heads = []
    for shape in map(tuple, dims.tolist()):
        head = cache.get(shape)
        if head is None:
            head = cache[shape] = _encode_shape(shape)
        heads.append(head)
    return heads


def _vectors(arr: pa.Array, plan: ColumnPlan) -> Parts:
    """Spark ML vectors (struct<type, size, indices, values>): dense as-is, sparse filled with zeros."""
    fields = dict(zip((f.name for f in arr.type), arr.flatten()))  # flatten() honours the slice offset
    kinds, sizes, indices, values = (fields[i] for i in ("type", "size", "indices", "values"))
    kinds = kinds.to_numpy(zero_copy_only=False)
    layout = list_layout(values, 1)
    dims = layout.dims.copy()
    sparse = np.flatnonzero(kinds == 0)
    dims[sparse, 0] = sizes.to_numpy(zero_copy_only=False)[sparse]
    if plan.shape is not None:
        return _fixed_vectors(layout, dims, sparse, indices, values, plan)
    (heads, data), byte_sizes = _array_parts(layout.leaf, layout.bounds, layout.dims, plan)
    if not len(sparse):
        return [heads, data], byte_sizes
    heads = _shape_heads(dims)
    rows = data.to_pylist()
    for row in sparse.tolist():
        dense = np.zeros(int(dims[row, 0]), "<f8")
        dense[np.asarray(indices[row].as_py(), np.int64)] = np.asarray(values[row].as_py(), "<f8")
        rows[row] = dense.tobytes()
    byte_sizes = np.fromiter(map(len, heads), np.int64, len(heads)) + dims[:, 0] * 8
    return [_binary_of(heads), _binary_of(rows)], byte_sizes


def _fixed_vectors(
    layout: Any, dims: np.ndarray, sparse: np.ndarray, indices: pa.Array, values: pa.Array, plan: ColumnPlan
) -> Parts:
    """Vectors declared ``ndarray:float64:<n>``: every row densified to exactly ``n`` values."""
    width = int(plan.shape[0]) if plan.shape else 0
    wrong = np.flatnonzero(dims[:, 0] != width)
    if wrong.size:
        row = int(wrong[0])
        raise ConversionError(
            f"column {plan.name!r} ({plan.type_name}): row {row} holds a vector of "
            f"{int(dims[row, 0])} values, but the column is declared {plan.encoding!r}"
        )
    dense = np.zeros((len(dims), width), "<f8")
    leaf = layout.leaf.to_numpy(zero_copy_only=False)
    is_dense = np.ones(len(dims), bool)
    is_dense[sparse] = False
    starts = layout.bounds[:-1][is_dense]
    dense[is_dense] = leaf[(starts[:, None] + np.arange(width)).reshape(-1)].reshape(-1, width)
    for row in sparse.tolist():
        dense[row, np.asarray(indices[row].as_py(), np.int64)] = np.asarray(values[row].as_py(), "<f8")
    return [_fixed_bytes(dense, width * 8)], None


ENCODERS: dict[str, Callable[[pa.Array, ColumnPlan], Parts]] = {
    "number": _numbers,
    "bool": _numbers,
    "date": _dates,
    "timestamp": _timestamps,
    "str": _strings,
    "bytes": _binary,
    "decimal": _python_values(lambda d: str(d).encode("ascii")),
    "json": _python_values(_json_bytes),
    "ndarray": _ndarrays,
    "vector": _vectors,
}


def encode_batch(columns: dict[str, pa.Array], plans: list[ColumnPlan]) -> tuple[Any, np.ndarray]:
    """Every row's MDS sample bytes, back to back in one buffer, and each row's size.

    Nulls must have been dealt with (see ``mds_core.convert.nulls``). Feed the result to
    ``MDSWriter.write_encoded_many``.
    """
    pieces: list[Any] = []
    var_sizes: list[np.ndarray] = []
    for plan in sorted(plans, key=lambda p: p.name):
        parts, sizes = ENCODERS[plan.kind](columns[plan.name], plan)
        pieces.extend(parts)
        if sizes is not None:
            var_sizes.append(sizes)
    if var_sizes:
        table = np.stack(var_sizes, axis=1)
        if table.max(initial=0) >= 1 << 32:
            raise ConversionError("a value of 4 GiB or more cannot be stored in an MDS sample")
        pieces.insert(0, _fixed_bytes(table.astype("<u4"), 4 * len(var_sizes)))
    return join_rows(pieces)


def join_rows(pieces: list[Any]) -> tuple[Any, np.ndarray]:
    """Concatenate the pieces row by row: (one buffer of every row, each row's size)."""
    if all(isinstance(piece, np.ndarray) for piece in pieces):
        block = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=1)
        return np.ascontiguousarray(block).reshape(-1), np.full(block.shape[0], block.shape[1], np.int64)
    arrays = [_as_binary(piece) for piece in pieces]
    joined = arrays[0] if len(arrays) == 1 else pc.binary_join_element_wise(*arrays, _NO_SEPARATOR)
    offsets = np.frombuffer(joined.buffers()[1], np.int64)[joined.offset : joined.offset + len(joined) + 1]
    values = joined.buffers()[2]  # absent when there are no bytes at all (no rows)
    data = memoryview(values if values is not None else b"")[int(offsets[0]) : int(offsets[-1])]
    return data, np.diff(offsets)


def _as_binary(piece: Any) -> pa.LargeBinaryArray:
    if not isinstance(piece, np.ndarray):
        return piece
    rows, width = piece.shape
    offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(piece))]
    )


def encode_rows(columns: dict[str, pa.Array], plans: list[ColumnPlan]) -> list[bytes]:
    """Every row's MDS sample bytes as one ``bytes`` each (for tests and small batches)."""
    data, sizes = encode_batch(columns, plans)
    view = memoryview(data).cast("B")
    ends = np.cumsum(sizes).tolist()
    return [bytes(view[end - size : end]) for end, size in zip(ends, sizes.tolist())]
