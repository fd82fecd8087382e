"""Hypothesis round trips: random columns, encodings, values, size limits and compressions."""

from __future__ import annotations

import json
import os
import string
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mds_core import LocalDataset, MDSWriter
from tests.golden import assert_same

INT_RANGES = {
    f"{k}{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) if k == "int" else (0, (1 << b) - 1)
    for k in ("int", "uint")
    for b in (8, 16, 32, 64)
}
# Each float encoding and the width hypothesis draws its values at.
FLOAT_WIDTHS: list[tuple[str, Literal[16, 32, 64]]] = [("float16", 16), ("float32", 32), ("float64", 64)]
ARRAY_DTYPES = sorted(INT_RANGES) + [name for name, _ in FLOAT_WIDTHS]


def _array(dtype: str, shape) -> st.SearchStrategy:
    return hnp.arrays(np.dtype(dtype), shape, elements={"allow_nan": False} if dtype.startswith("f") else None)


def _column() -> st.SearchStrategy[tuple[str, st.SearchStrategy, Callable[[Any], Any]]]:
    """(encoding, value strategy, expected decoded value from the written value)."""
    ident = lambda v: v  # noqa: E731
    scalar = st.sampled_from(sorted(INT_RANGES)).map(
        lambda name: (name, st.integers(*INT_RANGES[name]), lambda v, n=name: np.dtype(n).type(v))
    )
    floats = st.sampled_from(FLOAT_WIDTHS).map(
        lambda named: (named[0], st.floats(width=named[1], allow_nan=False), lambda v, n=named[0]: np.dtype(n).type(v))
    )
    fixed = [
        ("bytes", st.binary(max_size=300), ident),
        ("str", st.text(max_size=50), ident),
        ("int", st.integers(-(1 << 63), (1 << 63) - 1), ident),
        ("str_int", st.integers(), ident),
        ("str_float", st.floats(allow_nan=False), ident),
        ("str_decimal", st.decimals(allow_nan=False, allow_infinity=False), ident),
        (
            "json",
            st.recursive(
                st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5),
                lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                max_leaves=8,
            ),
            ident,
        ),
        ("pkl", st.tuples(st.integers(), st.text(max_size=5)), ident),
    ]
    dyn = st.sampled_from(ARRAY_DTYPES).map(
        lambda d: ("ndarray", _array(d, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)), ident)
    )
    typed = st.sampled_from(ARRAY_DTYPES).map(
        lambda d: (f"ndarray:{d}", _array(d, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=40)), ident)
    )
    shaped = st.tuples(st.sampled_from(ARRAY_DTYPES), st.lists(st.integers(1, 4), min_size=1, max_size=3)).map(
        lambda t: (f"ndarray:{t[0]}:{','.join(map(str, t[1]))}", _array(t[0], tuple(t[1])), ident)
    )
    return st.one_of(scalar, floats, st.sampled_from(fixed), dyn, typed, shaped)


@st.composite
def datasets(draw):
    names = draw(
        st.lists(st.text(string.ascii_letters + "_é", min_size=1, max_size=6), min_size=1, max_size=5, unique=True)
    )
    columns = {name: draw(_column()) for name in names}
    samples = draw(st.lists(st.fixed_dictionaries({n: c[1] for n, c in columns.items()}), max_size=25))
    size_limit = draw(st.none() | st.integers(1, 3000))
    compression = draw(st.sampled_from([None, None, "zstd", "zstd:1", "gz:1", "bz2", "br:1", "snappy"]))
    return columns, samples, size_limit, compression


def _same_decimal(actual, expected) -> None:
    assert isinstance(actual, Decimal) and (actual == expected or (actual.is_nan() and expected.is_nan()))
    assert str(actual) == str(expected)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=datasets())
def test_round_trip(tmp_path_factory, case) -> None:
    columns, samples, size_limit, compression = case
    out = tmp_path_factory.mktemp("rt") / "d"
    encodings = {name: c[0] for name, c in columns.items()}
    with MDSWriter(out=str(out), columns=encodings, size_limit=size_limit, compression=compression) as writer:
        for sample in samples:
            writer.write(sample)
    shards = json.loads((out / "index.json").read_text())["shards"]
    assert all(s["samples"] > 0 for s in shards), "no 0-sample shards"
    if size_limit:
        assert all(s["raw_data"]["bytes"] <= size_limit or s["samples"] == 1 for s in shards)
    assert sorted(os.listdir(out)) == sorted(
        ["index.json"] + [(s["zip_data"] or s["raw_data"])["basename"] for s in shards]
    )
    ds = LocalDataset(out, allow_unsafe_types=True)
    assert len(ds) == len(samples)
    for i, (got, sample) in enumerate(zip(ds, samples, strict=True)):
        assert list(got) == sorted(columns)
        for name, (encoding, _, expected_of) in columns.items():
            want = expected_of(sample[name])
            if isinstance(want, Decimal):
                _same_decimal(got[name], want)
            elif isinstance(want, np.ndarray) and want.dtype.kind == "f":
                assert got[name].dtype == want.dtype and got[name].shape == want.shape
                assert got[name].tobytes() == want.astype(want.dtype.newbyteorder("<")).tobytes()
            else:
                assert_same(got[name], want, f"sample {i} column {name} ({encoding})")
        assert_same(ds[i], got, f"ds[{i}]")
