"""One dict per sample from a block's decoded columns, by code compiled once for a schema's column names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast


def rows_of(names: list[str]) -> Callable[..., list[dict[str, Any]]]:
    """``f(*columns)``: a dict ``{names[0]: columns[0][i], ...}`` per sample, from code compiled for these names.

    0.165 µs a sample for 5 columns, against 0.38 for ``dict(zip(names, values))``. The code holds only made-up
    identifiers: the names come in as the keys' default values, never parsed.
    """
    keys = {f"k{i}": name for i, name in enumerate(names)}
    values, columns = [f"v{i}" for i in range(len(names))], [f"c{i}" for i in range(len(names))]
    params = ", ".join([*columns, *(f"{k}={k}" for k in keys)])
    display = ", ".join(f"{k}: {v}" for k, v in zip(keys, values))
    code = f"lambda {params}: [{{{display}}} for {', '.join(values)}, in zip({', '.join(columns)})]"
    return cast(Callable[..., list[dict[str, Any]]], eval(code, keys))
