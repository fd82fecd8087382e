"""The null policy: what happens to rows whose values MDS cannot store.

MDS has no null. ``error`` (the default) names the column and the first bad row; ``skip`` drops
such rows and counts them; ``fill`` replaces nulls by ``fill_values[column]`` or a per-type default.
``json`` columns store null as JSON ``null`` and never count as bad. Empty arrays cannot be stored
as ``ndarray`` either: they are errors, or skipped under ``skip``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mds_core.convert.arrow import list_layout
from mds_core.convert.type_rules import ColumnPlan
from mds_core.errors import ConversionError

_DEFAULT_FILLS: dict[str, Any] = {
    "number": 0,
    "bool": False,
    "date": 0,
    "timestamp": 0,
    "str": "",
    "bytes": b"",
    "decimal": Decimal(0),
}


def resolve_nulls(
    columns: dict[str, pa.Array],
    plans: list[ColumnPlan],
    policy: str,
    fill_values: dict[str, Any] | None = None,
    first_row: int = 0,
    where: str = "",
) -> tuple[dict[str, pa.Array], int]:
    """The columns ready to encode, and how many rows were skipped.

    ``first_row`` numbers the batch's rows in messages; ``where`` says where they are (a partition).
    """
    if policy == "fill":
        columns = {p.name: fill_column(columns[p.name], p, (fill_values or {}).get(p.name)) for p in plans} | {
            name: arr for name, arr in columns.items() if name not in {p.name for p in plans}
        }
    problems = [(plan, mask, reason) for plan in plans for mask, reason in _problems(columns[plan.name], plan)]
    problems = [(plan, mask, reason) for plan, mask, reason in problems if mask.any()]
    if not problems:
        return columns, 0
    if policy != "skip":
        plan, row, reason = min(((p, int(np.argmax(m)), r) for p, m, r in problems), key=lambda t: t[1])
        fix = "pass null_policy='skip' or 'fill'" if policy == "error" else "give fill_values or use null_policy='skip'"
        raise ConversionError(
            f"column {plan.name!r} ({plan.type_name}) has {reason} at row {first_row + row}{where}; "
            f"MDS cannot store it: {fix}"
        )
    bad = np.logical_or.reduce([mask for _, mask, _ in problems])
    keep = pa.array(~bad)
    return {name: arr.filter(keep) for name, arr in columns.items()}, int(bad.sum())


def _problems(arr: pa.Array, plan: ColumnPlan) -> list[tuple[np.ndarray, str]]:
    if plan.kind == "json":
        return []
    found = []
    if arr.null_count:
        found.append((arr.is_null().to_numpy(zero_copy_only=False), "a null"))
    if plan.kind == "ndarray":
        layout = list_layout(arr, plan.ndim)
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        found.append((layout.inner_nulls & valid, "a null inside its array"))
        found.append(((layout.dims == 0).any(axis=1) & valid, "an empty array (an ndarray needs an element)"))
    elif plan.kind == "vector":
        fields = dict(zip((f.name for f in arr.type), arr.flatten()))
        sparse = pc.fill_null(fields["type"], 1).to_numpy(zero_copy_only=False) == 0
        lengths = np.where(
            sparse,
            pc.fill_null(fields["size"], 0).to_numpy(zero_copy_only=False),
            pc.fill_null(pc.list_value_length(fields["values"]), 0).to_numpy(zero_copy_only=False),
        )
        found.append(((lengths == 0) & arr.is_valid().to_numpy(zero_copy_only=False), "an empty vector"))
    return found


def fill_column(arr: pa.Array, plan: ColumnPlan, value: Any) -> pa.Array:
    """``arr`` with its nulls (and null array elements) replaced."""
    if plan.kind == "json":
        return arr
    if plan.kind in _DEFAULT_FILLS:
        if not arr.null_count:
            return arr
        fill = _DEFAULT_FILLS[plan.kind] if value is None else value
        try:
            return pc.fill_null(arr, pa.scalar(fill, arr.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
            raise ConversionError(f"column {plan.name!r}: fill value {fill!r} does not fit {arr.type}: {err}") from err
    if plan.kind == "ndarray":
        return _fill_arrays(arr, plan, value)
    if arr.null_count:
        raise ConversionError(
            f"column {plan.name!r} ({plan.type_name}): null vectors cannot be filled; use null_policy='skip'"
        )
    return arr


def _fill_arrays(arr: pa.Array, plan: ColumnPlan, value: Any) -> pa.Array:
    layout = list_layout(arr, plan.ndim)
    if not arr.null_count and not layout.inner_nulls.any():
        return arr
    element = value if np.isscalar(value) else 0
    row_fill = None if value is None or np.isscalar(value) else np.asarray(value).tolist()
    if row_fill is None and plan.shape is not None:
        row_fill = np.zeros(plan.shape).tolist()
    rows = []
    for row in arr.to_pylist():
        if row is None:
            if row_fill is None:
                raise ConversionError(
                    f"column {plan.name!r}: null_policy='fill' needs fill_values[{plan.name!r}] (an array) to fill "
                    "null arrays of varying shape"
                )
            row = row_fill
        rows.append(_replace_none(row, element))
    return pa.array(rows, arr.type)


def _replace_none(value: Any, element: Any) -> Any:
    if value is None:
        return element
    if isinstance(value, list):
        return [_replace_none(v, element) for v in value]
    return value
