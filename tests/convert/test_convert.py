"""table_to_mds and the shared type rules: vectorised bytes equal the writer's, exact round trips, errors."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mds_core import LocalDataset
from mds_core.convert import table_to_mds
from mds_core.convert.arrow import encode_rows, plain
from mds_core.convert.type_rules import plan_columns
from mds_core.errors import ConversionError
from mds_core.format.shard import Schema
from tests.golden import assert_same

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _index(out: Path) -> list[dict]:
    return json.loads((out / "index.json").read_text())["shards"]


def _encodings(out: Path) -> dict[str, str]:
    shard = _index(out)[0]
    return dict(zip(shard["column_names"], shard["column_encodings"]))


# ---- the vectorised encoder produces exactly the writer's bytes ---------------------------------


def _ints(bits: int) -> st.SearchStrategy:
    return st.integers(-(1 << bits), (1 << bits) - 1)


# Each kind of generated column: its Arrow type and the values drawn for it.
KINDS: dict[str, tuple[pa.DataType, st.SearchStrategy]] = {
    "int8": (pa.int8(), _ints(7)),
    "int16": (pa.int16(), _ints(15)),
    "int32": (pa.int32(), _ints(31)),
    "int64": (pa.int64(), _ints(63)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=True)),
    "float64": (pa.float64(), st.floats(allow_nan=True)),
    "bool": (pa.bool_(), st.booleans()),
    "str": (pa.string(), st.text(max_size=20)),
    "bytes": (pa.binary(), st.binary(max_size=20)),
    "list": (pa.list_(pa.float32()), st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=5)),
    "nested": (
        pa.list_(pa.list_(pa.int16())),
        st.integers(1, 3).flatmap(
            lambda w: st.lists(st.lists(st.integers(-100, 100), min_size=w, max_size=w), min_size=1, max_size=3)
        ),
    ),
    "decimal": (pa.decimal128(12, 2), st.decimals(min_value=-(10**6), max_value=10**6, places=2, allow_nan=False)),
    "date": (pa.date32(), st.dates()),
    "json": (
        pa.struct([("a", pa.int64()), ("b", pa.string())]),
        st.fixed_dictionaries({"a": st.integers(-5, 5), "b": st.text(max_size=5)}),
    ),
}


def _python_value(kind: str, value, encoding: str):
    """What a user of MDSWriter would pass for ``value`` under the converter's encoding."""
    if kind.startswith(("int", "float")):
        return np.dtype(encoding).type(value)
    if kind == "bool":
        return np.uint8(value)
    if kind == "date":
        return np.int32((value - datetime.date(1970, 1, 1)).days)
    if kind in ("list", "nested"):
        return np.asarray(value, np.dtype(encoding.split(":")[1]))
    if kind == "json":  # a struct's fields come in schema order
        return {"a": value["a"], "b": value["b"]}
    return value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=5, unique=True).flatmap(
        lambda kinds: st.tuples(
            st.just(kinds), st.lists(st.tuples(*[KINDS[k][1] for k in kinds]), min_size=1, max_size=8)
        )
    )
)
def test_vectorised_bytes_equal_the_writers_bytes(case) -> None:
    kinds, rows = case
    names = [f"c_{kind}" for kind in kinds]
    table = pa.table(
        {name: pa.array([row[i] for row in rows], KINDS[kind][0]) for i, (name, kind) in enumerate(zip(names, kinds))}
    )
    plans = plan_columns(table.schema)
    encoded = encode_rows({p.name: plain(table.column(p.name)) for p in plans}, plans)
    schema = Schema.from_columns({p.name: p.encoding for p in plans})
    encodings = {p.name: p.encoding for p in plans}
    for row, sample in zip(rows, encoded):
        values = {
            name: _python_value(kind, row[i], encodings[name]) for i, (name, kind) in enumerate(zip(names, kinds))
        }
        assert sample == schema.encode(values)


# ---- every type round-trips through the reader ------------------------------------------------------


def _all_types(nan: float) -> dict[str, tuple[str, pa.Array]]:
    """Each column of the round trip: the encoding the converter picks, and three values at the type's edges."""
    ts = [
        datetime.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=datetime.UTC),
        datetime.datetime(1901, 12, 13, 20, 45, 52, 1, tzinfo=datetime.UTC),
        EPOCH,
    ]
    return {
        "i8": ("int8", pa.array([-128, 127, -1], pa.int8())),
        "i16": ("int16", pa.array([-32768, 32767, -2], pa.int16())),
        "i32": ("int32", pa.array([-(1 << 31), (1 << 31) - 1, 0], pa.int32())),
        "i64": ("int64", pa.array([-(1 << 63), (1 << 63) - 1, 5], pa.int64())),
        "f32": ("float32", pa.array([1.5, float("inf"), -0.0], pa.float32())),
        "f64": ("float64", pa.array([0.1, nan, -1e308], pa.float64())),
        "flag": ("uint8", pa.array([True, False, True])),
        "day": ("int32", pa.array([datetime.date(1, 1, 1), datetime.date(9999, 12, 31), datetime.date(1970, 1, 1)])),
        "ts": ("int64", pa.array(ts, pa.timestamp("us", "UTC"))),
        "ts_ntz": ("int64", pa.array([t.replace(tzinfo=None) for t in ts], pa.timestamp("us"))),
        "text": ("str", pa.array(["héllo \x00 wörld", "", "😀" * 100])),
        "blob": ("bytes", pa.array([b"\x00\xff", b"", b"\x00" * 3])),
        "money": (
            "str_decimal",
            pa.array([Decimal("1.10"), Decimal("-0.01"), Decimal("99999999.99")], pa.decimal128(10, 2)),
        ),
        "fixed": ("ndarray:float32:3", pa.array([[1.0, 2.0, 3.0]] * 3, pa.list_(pa.float32()))),
        "ragged": ("ndarray:int64", pa.array([[1], [2, 3], [-4, 5, 6]], pa.list_(pa.int64()))),
        "matrix": (
            "ndarray:int16",
            pa.array([[[1, 2], [3, 4], [5, 6]], [[7, 8]], [[9, 10]]], pa.list_(pa.list_(pa.int16()))),
        ),
        "bools": ("ndarray:uint8", pa.array([[True, False], [False], [True]], pa.list_(pa.bool_()))),
        "record": (
            "json",
            pa.array(
                [{"a": 1, "b": "x"}, {"a": None, "b": "y"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])
            ),
        ),
        "mapping": ("json", pa.array([[("k", 1.5)], [], None], pa.map_(pa.string(), pa.float64()))),
        "words": ("json", pa.array([["a", None], [], None], pa.list_(pa.string()))),
    }


def _all_types_table(nan: float = float("nan")) -> pa.Table:
    return pa.table({name: values for name, (_, values) in _all_types(nan).items()})


EXPECTED_ENCODINGS = {name: encoding for name, (encoding, _) in _all_types(0.0).items()}


def _expected(table: pa.Table, name: str, row: int):
    value = table.column(name)[row].as_py()
    encoding = EXPECTED_ENCODINGS[name]
    if name == "day":
        return np.int32((value - datetime.date(1970, 1, 1)).days)
    if name in ("ts", "ts_ntz"):
        base = EPOCH if name == "ts" else EPOCH.replace(tzinfo=None)
        return np.int64((value - base) // datetime.timedelta(microseconds=1))
    if encoding.startswith("ndarray"):
        return np.asarray(value, encoding.split(":")[1])
    if encoding == "json":
        return dict(value) if name == "mapping" and value is not None else value
    if encoding in ("str", "bytes", "str_decimal"):
        return value
    return np.dtype(encoding).type(value)


@pytest.mark.parametrize("source", ["arrow", "pandas", "dicts"])
def test_every_type_round_trips_through_the_reader(tmp_path: Path, source: str) -> None:
    # pandas marks missing floats with NaN, so Arrow reads a NaN there as null (the null policy applies)
    table = _all_types_table(nan=2.5 if source == "pandas" else float("nan"))
    data = {"arrow": table, "pandas": table.to_pandas(), "dicts": table.to_pylist()}[source]
    kwargs = {"schema": table.schema} if source != "arrow" else {}
    if source == "dicts":  # a stream of dicts is read batch by batch: array shapes are not detected
        kwargs["columns"] = {**EXPECTED_ENCODINGS}
    stats = table_to_mds(data, tmp_path / "out", **kwargs)
    assert (stats.rows, stats.skipped_rows, stats.shards) == (3, 0, 1)
    assert stats.compressed_bytes < stats.raw_bytes and stats.rows_per_second > 0
    assert _encodings(tmp_path / "out") == EXPECTED_ENCODINGS
    dataset = LocalDataset(tmp_path / "out")
    for row in range(3):
        sample = dataset[row]
        for name in EXPECTED_ENCODINGS:
            assert_same(sample[name], _expected(table, name, row), f"{name}[{row}]")


def test_dates_and_timestamps_restore_exactly(tmp_path: Path) -> None:
    table = _all_types_table()
    table_to_mds(table.select(["day", "ts"]), tmp_path / "out")
    for row, sample in enumerate(LocalDataset(tmp_path / "out")):
        assert datetime.date(1970, 1, 1) + datetime.timedelta(days=int(sample["day"])) == table["day"][row].as_py()
        assert EPOCH + datetime.timedelta(microseconds=int(sample["ts"])) == table["ts"][row].as_py()


def test_shapes_are_fixed_only_when_every_row_agrees(tmp_path: Path) -> None:
    table = pa.table(
        {
            "same": [[1.0, 2.0], [3.0, 4.0]],
            "differs": [[1.0], [2.0, 3.0]],
            "grid": [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [1, 2, 3]]],
        }
    )
    table_to_mds(table, tmp_path / "out", compression=None)
    assert _encodings(tmp_path / "out") == {
        "same": "ndarray:float64:2",
        "differs": "ndarray:float64",
        "grid": "ndarray:int64:2,3",
    }
    assert LocalDataset(tmp_path / "out")[1]["grid"].shape == (2, 3)


# ---- nulls, shapes, types and declared columns --------------------------------------------------------

DECLARED = pa.table({"id": [1], "v": pa.array([[1.0]], pa.list_(pa.float32())), "img": [b"\x89PNG"]})


def _refused(data: object, message: str, **kwargs: object) -> object:
    return pytest.param(data, kwargs, message, id=message.replace("\\", "")[:40])


@pytest.mark.parametrize(
    ("data", "kwargs", "message"),
    [
        _refused(
            pa.table({"id": list(range(10)), "x": [1, 2, 3, None, 5, None, 7, 8, 9, 10]}),
            r"column 'x' \(int64\) has a null at row 3.*null_policy='skip'",
        ),
        # Null rows found across batches are numbered from the start.
        _refused(pa.table({"v": [[1.0]] * 9000 + [None]}), r"column 'v' \(list<item: double>\) has a null at row 9000"),
        _refused(pa.table({"x": [1]}), "null_policy|fill_values", null_policy="bogus"),
        _refused(pa.table({"x": [1]}), "null_policy|fill_values", null_policy="error", fill_values={"x": 1}),
        _refused(pa.table({"m": [[[1, 2], [3, 4]], [[1, 2], [3]]]}), r"column 'm' row 1: nested array is ragged"),
        _refused(
            pa.table({"v": [[1.0, 2.0], [1.0, 2.0, 3.0]]}),
            r"column 'v' row 1: array of shape \(3,\) does not match .*float64:2",
            columns={"v": "ndarray:float64:2"},
        ),
        _refused(pa.table({"v": [[1.0], []]}), r"column 'v' .* has an empty array .* at row 1"),
        _refused(
            pa.table({"t": pa.array([1000, 1001], pa.timestamp("ns"))}), r"column 't' row 1: .* whole microseconds"
        ),
        _refused(
            pa.table({"x": pa.array([None], pa.duration("s"))}),
            r"column 'x' has type duration\[s\], which has no MDS encoding",
        ),
        _refused(
            pa.table({"x": pa.array([None], pa.struct([("when", pa.date32())]))}),
            r"column 'x' .* cannot be stored as JSON: x.when has type date32",
        ),
        _refused(pa.table({"x": pa.array([None], pa.map_(pa.int32(), pa.int32()))}), r"x has map keys of type int32"),
        _refused(
            DECLARED,
            r"columns \['nope'\] are not in the data; its columns are \['id', 'v', 'img'\]",
            columns={"nope": "int"},
        ),
        _refused(
            DECLARED,
            r"column 'id' \(int64\) cannot be written as 'int32'; accepted: \['int64', 'json'\]",
            columns={"id": "int32"},
        ),
        _refused(
            DECLARED,
            r"column 'v' .* holds float32 values and cannot be written as 'ndarray:int32'",
            columns={"v": "ndarray:int32"},
        ),
        _refused(
            DECLARED,
            r"is 1-dimensional but 'ndarray:float32:2,2' declares 2 dimensions",
            columns={"v": "ndarray:float32:2,2"},
        ),
        _refused(DECLARED, r"column 'id' \(int64\): unknown encoding 'bogus'", columns={"id": "bogus"}),
        _refused(DECLARED, r"columns must be a non-empty dict", columns={}),
        _refused(42, "takes a pyarrow Table, a pandas DataFrame or an iterable of dicts"),
        _refused([{"x": i} for i in range(8192)] + [{"x": "text"}], r"rows 8192..8192 do not fit"),
    ],
)
def test_bad_input_is_refused_by_name(tmp_path: Path, data, kwargs: dict, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        table_to_mds(data, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out" / "index.json").exists()


def test_skip_drops_and_counts_rows_with_nulls(tmp_path: Path) -> None:
    table = pa.table(
        {"id": list(range(6)), "x": [1, None, 3, None, 5, 6], "v": [[1.0], [2.0], None, [4.0], [], [6.0, None]]}
    )
    stats = table_to_mds(table, tmp_path / "out", null_policy="skip")
    assert (stats.rows, stats.skipped_rows) == (1, 5)
    assert [int(s["id"]) for s in LocalDataset(tmp_path / "out")] == [0]


def test_fill_uses_defaults_and_given_values(tmp_path: Path) -> None:
    table = pa.table({"x": [1, None], "s": ["a", None], "flag": [True, None], "v": [[1.0, None], None]})
    stats = table_to_mds(table, tmp_path / "out", null_policy="fill", fill_values={"x": -1, "v": [9.0, 9.0]})
    assert stats.rows == 2
    second = LocalDataset(tmp_path / "out")[1]
    assert (second["x"], second["s"], second["flag"]) == (-1, "", 0)
    assert second["v"].tolist() == [9.0, 9.0]
    assert LocalDataset(tmp_path / "out")[0]["v"].tolist() == [1.0, 0.0]


def test_json_columns_store_null(tmp_path: Path) -> None:
    table_to_mds(pa.table({"r": pa.array([None, {"a": 1}], pa.struct([("a", pa.int32())]))}), tmp_path / "out")
    assert [s["r"] for s in LocalDataset(tmp_path / "out")] == [None, {"a": 1}]


def test_declared_columns_select_and_retype(tmp_path: Path) -> None:
    table = pa.table({"id": [1, 2], "skip": ["a", "b"], "img": [b"raw", b"raw2"], "v": [[1.0, 2.0], [3.0, 4.0]]})
    table_to_mds(table, tmp_path / "out", columns={"id": "json", "img": "jpeg", "v": "ndarray:float64:2"})
    assert _encodings(tmp_path / "out") == {"id": "json", "img": "jpeg", "v": "ndarray:float64:2"}
    shard = _index(tmp_path / "out")[0]
    assert shard["column_sizes"] == [None, None, 16]


def test_pandas_categoricals_and_many_batches(tmp_path: Path) -> None:
    frame = pd.DataFrame({"label": pd.Categorical(["a", "b", "a"] * 7000), "n": np.arange(21000, dtype=np.int16)})
    stats = table_to_mds(frame, tmp_path / "out", size_limit="64kb")
    assert stats.rows == 21000 and stats.shards > 1
    dataset = LocalDataset(tmp_path / "out")
    assert [dataset[i]["label"] for i in (0, 1, 20999)] == ["a", "b", "a"]
    assert_same(dataset[20999]["n"], np.int16(20999), "n[20999]")


def test_an_empty_batch_encodes_to_nothing() -> None:
    from mds_core.convert.arrow import encode_batch

    table = pa.table(
        {"a": pa.array([], pa.string()), "b": pa.array([], pa.int32()), "c": pa.array([], pa.list_(pa.float32()))}
    )
    plans = plan_columns(table.schema)
    data, sizes = encode_batch({p.name: plain(table.column(p.name)) for p in plans}, plans)
    assert memoryview(data).nbytes == 0 and sizes.tolist() == []
