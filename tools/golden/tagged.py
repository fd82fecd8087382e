"""Tagged JSON, the value format of tests/fixtures/mds-golden (samples/ and expected/).

One object per value: ``{"t": "int", "v": "-2"}``, ``{"t": "np", "dtype": "int8", "b64": ...}``, ... (the
fixtures' description in tools/golden/README.md). ``json`` tags appear in samples/ only: the raw value a
``json`` column was given, which the reader returns as plain lists and dicts.
"""

from __future__ import annotations

import base64
import decimal
import json
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tag(value: Any) -> dict[str, Any]:
    """One Python value as a tagged JSON object."""
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return {
            "t": "np",
            "dtype": value.dtype.name,
            "b64": _b64(value.astype(value.dtype.newbyteorder("<")).tobytes()),
        }
    if isinstance(value, bool):  # before int: bool subclasses int
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": str(value)}
    if isinstance(value, float):
        return {"t": "float", "v": repr(value)}
    if value is None:
        return {"t": "none"}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, bytes):
        return {"t": "bytes", "b64": _b64(value)}
    if isinstance(value, decimal.Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
        return {"t": "ndarray", "dtype": value.dtype.name, "shape": list(value.shape), "b64": _b64(data)}
    if isinstance(value, Image.Image):
        return {"t": "image", "mode": value.mode, "size": list(value.size), "b64": _b64(value.tobytes())}
    for kind in (list, tuple, set):
        if isinstance(value, kind):
            return {"t": kind.__name__, "v": [tag(v) for v in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": {k: tag(v) for k, v in value.items()}}
    raise TypeError(f"cannot tag {type(value)}")


def _array(obj: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(obj["b64"]), np.dtype(obj["dtype"]).newbyteorder("<"))


# Each decoder takes the tagged object; typed so that untag() calls a typed function.
_SIMPLE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "int": lambda o: int(o["v"]),
    "float": lambda o: float(o["v"]),
    "bool": lambda o: o["v"],
    "str": lambda o: o["v"],
    "json": lambda o: o["v"],
    "none": lambda o: None,
    "bytes": lambda o: base64.b64decode(o["b64"]),
    "decimal": lambda o: decimal.Decimal(o["v"]),
    # Back to the native dtype (as the writer was given it), so that tag() gives the same dtype name.
    "np": lambda o: _array(o).astype(o["dtype"])[0],
    "ndarray": lambda o: _array(o).astype(o["dtype"]).reshape(o["shape"]),
    "image": lambda o: Image.frombytes(o["mode"], tuple(o["size"]), base64.b64decode(o["b64"])),
}
_CONTAINERS = {"list": list, "tuple": tuple, "set": set}


def untag(obj: dict[str, Any]) -> Any:
    """The Python value a tagged JSON object stands for."""
    kind = obj["t"]
    if kind in _SIMPLE:
        return _SIMPLE[kind](obj)
    if kind in _CONTAINERS:
        return _CONTAINERS[kind](untag(v) for v in obj["v"])
    if kind == "dict":
        return {k: untag(v) for k, v in obj["v"].items()}
    raise ValueError(f"unknown tag {kind!r}")


def sample_line(sample: dict[str, Any], columns: dict[str, str]) -> str:
    """One line of samples/: a ``json`` column keeps its raw value (tag ``json``), the rest are tagged."""
    row = {col: {"t": "json", "v": v} if columns.get(col) == "json" else tag(v) for col, v in sample.items()}
    return json.dumps(row)


def value_line(sample: dict[str, Any]) -> str:
    """One line of expected/: what the reader returned, every value tagged."""
    return json.dumps({col: tag(v) for col, v in sample.items()})


def read_lines(text: str) -> list[dict[str, Any]]:
    """The rows of a samples/ or expected/ file, untagged."""
    return [{col: untag(v) for col, v in json.loads(line).items()} for line in text.splitlines() if line]
