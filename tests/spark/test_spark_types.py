"""Every Spark type round-trips through dataframe_to_mds and LocalDataset with exact values and dtypes."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mds_core import LocalDataset, dataframe_to_mds
from tests.golden import assert_same

T = pytest.importorskip("pyspark.sql.types")
linalg = pytest.importorskip("pyspark.ml.linalg")
UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
STAMPS = [
    datetime.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
    datetime.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    EPOCH,
    datetime.datetime(2038, 1, 19, tzinfo=UTC),
]
# name -> (its Spark type, the encoding the index must hold, its value in rows 0 to 3; row i has id i)
COLUMNS: dict[str, tuple[Any, str, list[Any]]] = {
    "id": (T.LongType(), "int64", [0, 1, 2, 3]),
    "byte": (T.ByteType(), "int8", [-128, 127, -1, 0]),
    "short": (T.ShortType(), "int16", [-32768, 32767, -2, 0]),
    "int": (T.IntegerType(), "int32", [-(1 << 31), (1 << 31) - 1, 0, 1]),
    "float": (T.FloatType(), "float32", [1.5, float("inf"), -0.0, 2.0]),
    "double": (T.DoubleType(), "float64", [0.1, float("nan"), -1e308, 2.0]),
    "decimal": (
        T.DecimalType(12, 3),
        "str_decimal",
        [Decimal("-123456789.123"), Decimal("0.000"), Decimal("1.100"), Decimal("999999999.999")],
    ),
    "string": (T.StringType(), "str", ["héllo 😀", "", "x" * 1000, "plain"]),
    "binary": (T.BinaryType(), "bytes", [b"\x00\xff", b"", b"\x00" * 5, b"abc"]),
    "boolean": (T.BooleanType(), "uint8", [True, False, True, False]),
    "date": (
        T.DateType(),
        "int32",
        [datetime.date(1, 1, 1), datetime.date(9999, 12, 31), datetime.date(1970, 1, 1), datetime.date(2000, 2, 29)],
    ),
    "timestamp": (T.TimestampType(), "int64", STAMPS),
    "timestamp_ntz": (T.TimestampNTZType(), "int64", [stamp.replace(tzinfo=None) for stamp in STAMPS]),
    "floats_fixed": (
        T.ArrayType(T.FloatType(), False),
        "ndarray:float32:3",
        [[1.0, -2.0, 3.5], [0.0, 0.0, -0.0], [7.0, 8.0, 9.0], [1.0, 1.0, 1.0]],
    ),
    "longs_ragged": (
        T.ArrayType(T.LongType(), True),
        "ndarray:int64",
        [[1, 2, 3], [-(1 << 63)], [(1 << 63) - 1, 0], [4]],
    ),
    "bytes_array": (T.ArrayType(T.ByteType(), True), "ndarray:int8", [[-1, 127], [0], [5, 6, 7], [1]]),
    "matrix": (
        T.ArrayType(T.ArrayType(T.ShortType(), False), False),
        "ndarray:int16",
        [[[1, 2], [3, 4], [5, 6]], [[-7, 8]], [[9], [10]], [[1, 1, 1]]],
    ),
    "vector": (
        linalg.VectorUDT(),
        "ndarray:float64",
        [
            linalg.Vectors.dense([1.0, 2.0]),
            linalg.Vectors.sparse(4, [1, 3], [5.0, -6.0]),
            linalg.Vectors.dense([3.0]),
            linalg.Vectors.sparse(2, [], []),
        ],
    ),
    "struct": (
        T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType())]),
        "json",
        [{"a": 1, "b": "x"}, {"a": None, "b": "y"}, None, {"a": 3, "b": None}],
    ),
    "map": (T.MapType(T.StringType(), T.DoubleType()), "json", [{"k": 1.5}, {}, None, {"z": -1.0}]),
}
ENCODINGS = {name: encoding for name, (_, encoding, _) in COLUMNS.items()}


def _schema():
    return T.StructType([T.StructField(name, kind, name != "id") for name, (kind, _, _) in COLUMNS.items()])


def _rows() -> list[tuple]:
    return list(zip(*(values for _, _, values in COLUMNS.values())))


def _expected(name: str, value):
    encoding = ENCODINGS[name]
    if name == "date":
        return np.int32((value - datetime.date(1970, 1, 1)).days)
    if name == "timestamp":
        return np.int64((value - EPOCH) // datetime.timedelta(microseconds=1))
    if name == "timestamp_ntz":
        return np.int64((value - EPOCH.replace(tzinfo=None)) // datetime.timedelta(microseconds=1))
    if name == "vector":
        return value.toArray().astype(np.float64)
    if encoding.startswith("ndarray"):
        return np.asarray(value, encoding.split(":")[1])
    if name == "struct":
        return None if value is None else dict(value)
    if encoding in ("json", "str", "bytes", "str_decimal"):
        return value
    return np.dtype(encoding).type(value)


@pytest.fixture(scope="module")
def all_types(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("types") / "out"
    frame = spark.createDataFrame(_rows(), _schema()).repartition(2, "id")
    result = dataframe_to_mds(frame, mds_kwargs={"out": str(out)})
    samples = {int(s["id"]): s for s in LocalDataset(out)}
    return out, result, samples


@pytest.mark.connect_too
def test_the_index_holds_the_documented_encodings(all_types) -> None:
    out, result, samples = all_types
    shard = json.loads((out / "index.json").read_text())["shards"][0]
    assert dict(zip(shard["column_names"], shard["column_encodings"])) == ENCODINGS
    assert shard["compression"] == "zstd"  # the reference's default for dataframe_to_mds
    assert result == (str(out), "") and result.stats.rows == 4 and sorted(samples) == [0, 1, 2, 3]


@pytest.mark.parametrize("name", [n for n in ENCODINGS if n != "id"])
@pytest.mark.connect_too
def test_each_type_round_trips_exactly(all_types, name: str) -> None:
    _, _, samples = all_types
    for row_id, value in enumerate(COLUMNS[name][2]):
        assert_same(samples[row_id][name], _expected(name, value), f"{name}[{row_id}]")


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-128, 127),
            st.integers(-(1 << 15), (1 << 15) - 1),
            st.text(max_size=30),
            st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_generated_frames_round_trip(spark, tmp_path_factory, rows) -> None:
    schema = "b tinyint, s smallint, t string, v array<float>"
    out = tmp_path_factory.mktemp("generated") / "out"
    dataframe_to_mds(spark.createDataFrame(rows, schema).coalesce(1), mds_kwargs={"out": str(out)})
    samples = list(LocalDataset(out))
    assert len(samples) == len(rows)
    for sample, (b, s, t, v) in zip(samples, rows):
        assert_same(sample["b"], np.int8(b), "b")
        assert_same(sample["s"], np.int16(s), "s")
        assert sample["t"] == t
        assert_same(np.asarray(sample["v"]), np.asarray(v, np.float32), "v")


@pytest.mark.connect_too
def test_vectors_declared_with_a_fixed_size(spark, tmp_path) -> None:
    from mds_core.errors import ConversionError

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", linalg.VectorUDT())])
    rows = [
        (0, linalg.Vectors.dense([1.0, 2.0, 3.0])),
        (1, linalg.Vectors.sparse(3, [0, 2], [-4.0, 5.0])),
        (2, linalg.Vectors.dense([0.5, 0.0, -0.5])),
    ]
    columns = {"id": "int64", "v": "ndarray:float64:3"}
    dataframe_to_mds(
        spark.createDataFrame(rows, schema).coalesce(1), mds_kwargs={"out": str(tmp_path / "ok"), "columns": columns}
    )
    got = {int(s["id"]): s["v"] for s in LocalDataset(tmp_path / "ok")}
    for row_id, vector in rows:
        assert_same(got[row_id], vector.toArray().astype(np.float64), f"v[{row_id}]")
    wrong = [(0, linalg.Vectors.dense([1.0, 2.0, 3.0])), (1, linalg.Vectors.sparse(4, [0], [1.0]))]
    with pytest.raises(
        ConversionError,
        match=r"column 'v' \(vector\): row 1 holds a vector of 4 values, but the "
        r"column is declared 'ndarray:float64:3'",
    ):
        dataframe_to_mds(
            spark.createDataFrame(wrong, schema).coalesce(1),
            mds_kwargs={"out": str(tmp_path / "wrong"), "columns": columns},
        )
    assert not (tmp_path / "wrong" / "index.json").exists()
