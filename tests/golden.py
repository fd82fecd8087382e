"""Read the reference's fixtures (tests/fixtures/mds-golden): tagged JSON values and case metadata."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from mds_core import MDSWriter

GOLDEN = Path(__file__).parent / "fixtures" / "mds-golden"
CASES = json.loads((GOLDEN / "cases.json").read_text())["cases"]
CASE_NAMES = [case["name"] for case in CASES]


def case(name: str) -> dict[str, Any]:
    return next(c for c in CASES if c["name"] == name)


_SCALARS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "decimal": Decimal}
_CONTAINERS: dict[str, Callable[[Iterator[Any]], Any]] = {"list": list, "tuple": tuple, "set": set}


def untag(value: dict[str, Any]) -> Any:
    """A tagged fixture value as the Python object it stands for."""
    tag = value["t"]
    if tag in _SCALARS:
        return _SCALARS[tag](value["v"])
    if tag in ("bool", "str", "json"):
        return value["v"]
    if tag == "none":
        return None
    if tag in _CONTAINERS:
        return _CONTAINERS[tag](untag(v) for v in value["v"])
    if tag == "dict":
        return {k: untag(v) for k, v in value["v"].items()}
    if tag not in ("bytes", "np", "ndarray", "image"):
        raise ValueError(f"unknown tag {tag}")
    data = base64.b64decode(value["b64"])
    if tag == "bytes":
        return data
    if tag == "image":
        return Image.frombytes(value["mode"], tuple(value["size"]), data)
    array = np.frombuffer(data, np.dtype(value["dtype"]).newbyteorder("<"))
    return array[0] if tag == "np" else array.reshape(value["shape"])


def read_jsonl(kind: str, name: str) -> list[dict[str, Any]]:
    lines = (GOLDEN / kind / f"{name}.jsonl").read_text().splitlines()
    return [{col: untag(v) for col, v in json.loads(line).items()} for line in lines if line]


def write_case(name: str, out: Path) -> Path:
    """The case's samples written to ``out`` by our writer, with the case's columns and writer options."""
    meta = case(name)
    with MDSWriter(out=str(out), columns=meta["columns"], **meta["writer_kwargs"]) as writer:
        for sample in read_jsonl("samples", name):
            writer.write(sample)
    return out


def assert_same(actual: Any, expected: Any, where: str) -> None:
    """Equal values with equal Python/numpy types, dtypes, shapes and image modes; NaN equals NaN."""
    assert type(actual) is type(expected) or isinstance(actual, Image.Image), (
        f"{where}: type {type(actual).__name__} != {type(expected).__name__}"
    )
    if isinstance(expected, Image.Image):
        assert isinstance(actual, Image.Image), f"{where}: not an image"
        assert (actual.mode, actual.size) == (expected.mode, expected.size), where
        assert actual.tobytes() == expected.tobytes(), f"{where}: pixels differ"
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), where
        assert np.asarray(actual).tobytes() == np.asarray(expected).tobytes(), f"{where}: values differ"
    elif isinstance(expected, float) and expected != expected:
        assert actual != actual, f"{where}: expected nan"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
