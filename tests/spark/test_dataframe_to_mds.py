"""dataframe_to_mds: layout by partition, exactly-once commits under retries, reproducible bytes, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from mds_core import LocalDataset, dataframe_to_mds
from mds_core.errors import ConversionError, OutputExistsError

F = pytest.importorskip("pyspark.sql.functions")
T = pytest.importorskip("pyspark.sql.types")


def _frame(spark, rows: int = 400, partitions: int = 8):
    """Mixed columns, ``partitions`` partitions of deterministic content."""
    return (
        spark.range(rows, numPartitions=partitions)
        .withColumn("label", (F.col("id") % 7).cast("int"))
        .withColumn("text", F.concat(F.lit("row "), F.col("id").cast("string")))
        .withColumn("vec", F.array(*[(F.col("id") * k).cast("float") for k in range(4)]))
    )


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _indexed_files(root: Path) -> set[str]:
    shards = json.loads((root / "index.json").read_text())["shards"]
    names = {s["zip_data"]["basename"] if s["zip_data"] else s["raw_data"]["basename"] for s in shards}
    partitions = {name.split("/")[0] for name in names}
    return names | {f"{p}/index.json" for p in partitions} | {"index.json"}


@pytest.mark.connect_too
def test_eight_partitions_to_a_local_path(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = dataframe_to_mds(_frame(spark), mds_kwargs={"out": str(out), "size_limit": "1kb"})
    assert result == (str(out), "")
    assert sorted(os.listdir(out)) == [f"{p:05}" for p in range(8)] + ["index.json"]
    stats = result.stats
    assert stats.rows == 400 and stats.rows_per_partition == [50] * 8 and stats.skipped_rows == 0
    assert stats.shards == len(json.loads((out / "index.json").read_text())["shards"]) > 8
    assert 0 < stats.compressed_bytes < stats.raw_bytes and stats.rows_per_second > 0
    assert set(_files(out)) == _indexed_files(out)  # no staging, no stray files
    samples = list(LocalDataset(out))
    assert [int(s["id"]) for s in samples] == list(range(400))  # partition order, each row once
    assert samples[399]["vec"].tolist() == [0.0, 399.0, 798.0, 1197.0]
    assert samples[5]["text"] == "row 5" and samples[5]["label"] == np.int32(5)


def test_two_runs_give_byte_identical_output(spark, tmp_path: Path) -> None:
    frame = _frame(spark, rows=300, partitions=3)
    for name in ("a", "b"):
        dataframe_to_mds(frame, mds_kwargs={"out": str(tmp_path / name), "size_limit": "2kb", "hashes": ["xxh64"]})
    first, second = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert list(first) == list(second) and len(first) > 6
    assert first == second


def _fail_first_attempt(value):  # no type hints: pyspark would read them as a pandas UDF's
    """A UDF that makes partition 2's first attempt fail half-way through."""
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None  # a UDF runs in a task
    if context.partitionId() == 2 and context.attemptNumber() == 0 and value % 50 == 40:
        raise RuntimeError("injected failure on the first attempt")
    return value


@pytest.mark.connect_too
def test_a_failed_first_attempt_still_gives_exactly_once_output(spark, tmp_path: Path) -> None:
    flaky = F.udf(_fail_first_attempt, T.LongType())
    frame = _frame(spark, rows=200, partitions=4).withColumn("id", flaky("id"))
    out = tmp_path / "out"
    result = dataframe_to_mds(frame, mds_kwargs={"out": str(out), "size_limit": "1kb"})
    assert result.stats.rows_per_partition == [50] * 4
    assert set(_files(out)) == _indexed_files(out)  # (before reading: reading adds decompressed shards)
    assert sorted(int(s["id"]) for s in LocalDataset(out)) == list(range(200))


def _crash_after_writing(frame, crash_partition: int, out: str, seen: str):
    """A udf_iterable that, on the first attempt, kills its Python worker after shards hit the disk."""
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None  # a UDF runs in a task
    for count, record in enumerate(frame.to_dict("records")):
        if context.partitionId() == crash_partition and context.attemptNumber() == 0 and count == 30:
            staged = [str(p) for p in Path(out, "_staging").rglob("*.zstd")]
            Path(seen).write_text(json.dumps(staged))
            os._exit(17)  # no clean-up runs: the attempt's staged shards stay behind
        yield {"id": int(record["id"]), "text": record["text"]}


def test_a_killed_attempt_leaves_no_orphans(spark, tmp_path: Path) -> None:
    out, seen = tmp_path / "out", tmp_path / "seen.json"
    result = dataframe_to_mds(
        _frame(spark, rows=200, partitions=4),
        merge_index=True,
        mds_kwargs={"out": str(out), "columns": {"id": "int", "text": "str"}, "size_limit": "256b"},
        udf_iterable=_crash_after_writing,
        udf_kwargs={"crash_partition": 1, "out": str(out), "seen": str(seen)},
    )
    orphans = [p for p in json.loads(seen.read_text()) if "/00001." in p]
    assert orphans, "the killed attempt should have staged shards before it died"
    assert not any(os.path.exists(p) for p in orphans)
    assert result.stats.rows == 200
    assert set(_files(out)) == _indexed_files(out)
    assert not (out / "_staging").exists()
    assert sorted(int(s["id"]) for s in LocalDataset(out)) == list(range(200))


def test_merge_index_false_leaves_partition_indexes_only(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    dataframe_to_mds(_frame(spark, rows=40, partitions=2), merge_index=False, mds_kwargs={"out": str(out)})
    assert sorted(os.listdir(out)) == ["00000", "00001"]
    assert [int(s["id"]) for s in LocalDataset(out / "00001")] == list(range(20, 40))


def test_columns_select_and_retype(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    columns = {"id": "int64", "vec": "ndarray:float32", "label": "json"}
    dataframe_to_mds(_frame(spark, rows=10, partitions=1), mds_kwargs={"out": str(out), "columns": columns})
    shard = json.loads((out / "index.json").read_text())["shards"][0]
    assert dict(zip(shard["column_names"], shard["column_encodings"])) == columns
    assert LocalDataset(out)[3]["label"] == 3


@pytest.mark.connect_too
def test_nulls_name_the_column_and_first_row(spark, tmp_path: Path) -> None:
    frame = _frame(spark, rows=20, partitions=1).withColumn(
        "maybe", F.when(F.col("id").isin(7, 9), F.lit(None)).otherwise(F.col("id").cast("short"))
    )
    with pytest.raises(ConversionError, match=r"column 'maybe' \(smallint\) has a null at row 7 of partition 0"):
        dataframe_to_mds(frame, mds_kwargs={"out": str(tmp_path / "error")})
    assert not (tmp_path / "error" / "index.json").exists() and not (tmp_path / "error" / "_staging").exists()
    skipped = dataframe_to_mds(frame, mds_kwargs={"out": str(tmp_path / "skip")}, null_policy="skip")
    assert (skipped.stats.rows, skipped.stats.skipped_rows) == (18, 2)
    filled = dataframe_to_mds(
        frame, mds_kwargs={"out": str(tmp_path / "fill")}, null_policy="fill", fill_values={"maybe": -1}
    )
    assert filled.stats.rows == 20 and LocalDataset(tmp_path / "fill")[9]["maybe"] == np.int16(-1)


@pytest.mark.parametrize(
    "mds_kwargs,message",
    [
        ({}, "mds_kwargs must contain 'out'"),
        ({"out": "X", "columns": {"nope": "int"}}, r"columns \['nope'\] are not in the data"),
        ({"out": "X", "columns": {"label": "int64"}}, r"column 'label' \(int\) cannot be written as 'int64'; accepted"),
        ({"out": "X", "columns": {"vec": "ndarray:float32:5"}}, r"column 'vec' row 0: array of shape \(4,\)"),
    ],
)
def test_argument_errors(spark, tmp_path: Path, mds_kwargs: dict, message: str) -> None:
    if "out" in mds_kwargs:
        mds_kwargs = {**mds_kwargs, "out": str(tmp_path / "out")}
    with pytest.raises(ConversionError, match=message):
        dataframe_to_mds(_frame(spark, rows=4, partitions=1), mds_kwargs=mds_kwargs)


@pytest.mark.connect_too
def test_unsupported_types_and_empty_frames(spark, tmp_path: Path) -> None:
    interval = spark.range(2).select(F.expr("INTERVAL '1' DAY").alias("gap"))
    with pytest.raises(ConversionError, match=r"column 'gap' has type interval day, which has no MDS encoding"):
        dataframe_to_mds(interval, mds_kwargs={"out": str(tmp_path / "a")})
    with pytest.raises(ConversionError, match="dataframe is empty"):
        dataframe_to_mds(spark.range(0), mds_kwargs={"out": str(tmp_path / "b")})
    with pytest.raises(
        ConversionError, match=r"must be a pyspark.sql.DataFrame \(classic or Spark Connect\), got builtins.NoneType"
    ):
        dataframe_to_mds(None, mds_kwargs={"out": str(tmp_path / "c")})
    with pytest.raises(ConversionError, match=r"got pandas\.(core\.frame\.)?DataFrame$"):
        dataframe_to_mds(spark.range(2).toPandas(), mds_kwargs={"out": str(tmp_path / "d")})


def test_existing_output_is_refused_unless_exist_ok(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    dataframe_to_mds(_frame(spark, rows=10, partitions=2), mds_kwargs={"out": str(out)})
    with pytest.raises(OutputExistsError, match="already holds"):
        dataframe_to_mds(_frame(spark, rows=10, partitions=2), mds_kwargs={"out": str(out)})
    dataframe_to_mds(_frame(spark, rows=6, partitions=1), mds_kwargs={"out": str(out), "exist_ok": True})
    assert sorted(os.listdir(out)) == ["00000", "index.json"] and len(LocalDataset(out)) == 6


@pytest.mark.connect_too
def test_a_shape_guessed_from_the_first_row_is_verified(spark, tmp_path: Path) -> None:
    """The fixed-shape form is guessed from the first row; a later row of another shape means dynamic."""
    uniform = spark.range(30, numPartitions=3).select("id", F.array_repeat(F.col("id").cast("float"), 3).alias("v"))
    dataframe_to_mds(uniform, mds_kwargs={"out": str(tmp_path / "uniform")})
    odd = uniform.withColumn("v", F.when(F.col("id") == 25, F.array(F.lit(1.0).cast("float"))).otherwise(F.col("v")))
    result = dataframe_to_mds(odd, mds_kwargs={"out": str(tmp_path / "odd")})
    encodings = {
        name: json.loads((tmp_path / name / "index.json").read_text())["shards"][0]["column_encodings"]
        for name in ("uniform", "odd")
    }
    assert encodings == {"uniform": ["int64", "ndarray:float32:3"], "odd": ["int64", "ndarray:float32"]}
    assert result.stats.rows == 30 and not (tmp_path / "odd" / "_staging").exists()
    samples = list(LocalDataset(tmp_path / "odd"))
    assert samples[25]["v"].tolist() == [1.0] and samples[24]["v"].tolist() == [24.0] * 3


@pytest.mark.connect_too
def test_progress_bar_counts_partitions(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    dataframe_to_mds(
        _frame(spark, rows=40, partitions=4), mds_kwargs={"out": str(tmp_path / "out"), "progress_bar": True}
    )
    err = capsys.readouterr().err
    assert f"partitions -> {tmp_path / 'out'}" in err and "4/4" in err
