"""MDSWriter behaviour: arguments, size limits, atomic publication and the deliberate fixes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mds_core import LocalDataset, MDSWriter
from mds_core.errors import (
    EncodeError,
    HashAlgorithmError,
    MDSError,
    MissingColumnError,
    OutputExistsError,
    ShardTooLargeError,
    SizeError,
    UnknownEncodingError,
    WriterError,
)
from mds_core.sizes import bytes_to_int, parse_size_limit

COLUMNS = {"id": "int", "payload": "bytes"}


def _write(out: Path, samples: list[dict], **kwargs) -> list[dict]:
    with MDSWriter(out=str(out), columns=kwargs.pop("columns", COLUMNS), **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return json.loads((out / "index.json").read_text())["shards"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("64mb", 67108864), ("1.5kb", 1536), ("100b", 100), ("100", 100), (" 2KB ", 2048), (1024.9, 1024), (7, 7)],
)
def test_sizes_parse_like_the_reference(text, value) -> None:
    assert bytes_to_int(text) == value


@pytest.mark.parametrize("bad", ["64 megabytes", "mb", "-5", "1e3kb", "", True])
def test_unparseable_sizes_raise_size_error_naming_the_value(bad) -> None:
    with pytest.raises(SizeError, match=re.escape(repr(bad))) as caught:
        bytes_to_int(bad)
    assert isinstance(caught.value, ValueError) and not isinstance(caught.value, WriterError)  # the reference's type


def test_an_unparseable_size_limit_is_a_writer_error_naming_the_argument(tmp_path: Path) -> None:
    with pytest.raises(WriterError, match=r"^size_limit: Unsupported value/suffix 'bad': a size is bytes"):
        MDSWriter(out=str(tmp_path / "out"), columns=COLUMNS, size_limit="bad")
    with pytest.raises(WriterError, match=r"^size_limit: a size must be a number or a string like '64mb', got list$"):
        parse_size_limit([64])  # type: ignore[arg-type]


def test_size_limit_bounds() -> None:
    assert parse_size_limit(None) is None and parse_size_limit(0) is None and parse_size_limit("") is None
    with pytest.raises(WriterError, match="between 0 and 4 GiB"):
        parse_size_limit(-1)
    with pytest.raises(WriterError, match="between 0 and 4 GiB"):
        parse_size_limit("4gb")


def test_raw_shards_fill_up_to_exactly_the_limit(tmp_path: Path) -> None:
    per_sample = 4 + 8 + 50 + 4  # payload size entry, id, payload, offset-table entry
    header = 8 + len(json.dumps(_config_for(999), sort_keys=True))  # count + first offset + config
    limit = header + 5 * per_sample  # three digits, like 999, so the header length is the same
    assert 100 <= limit < 1000
    shards = _write(tmp_path / "d", [{"id": i, "payload": b"x" * 50} for i in range(23)], size_limit=limit)
    assert [s["samples"] for s in shards] == [5, 5, 5, 5, 3]
    assert [s["raw_data"]["bytes"] for s in shards] == [limit] * 4 + [header + 3 * per_sample]


def _config_for(size_limit: int) -> dict:
    return {
        "column_encodings": ["int", "bytes"],
        "column_names": ["id", "payload"],
        "column_sizes": [8, None],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "size_limit": size_limit,
        "version": 2,
    }


def test_a_sample_bigger_than_the_limit_gets_its_own_shard_and_no_empty_shard(tmp_path: Path) -> None:
    samples = [{"id": 0, "payload": b"a" * 1000}, {"id": 1, "payload": b"b"}, {"id": 2, "payload": b"c" * 1000}]
    shards = _write(tmp_path / "d", samples, size_limit=300)
    assert [s["samples"] for s in shards] == [1, 1, 1]
    assert [s["id"] for s in LocalDataset(tmp_path / "d")] == [0, 1, 2]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        pytest.param({"hashes": ["sha1", "md5"]}, HashAlgorithmError, "sorted and unique", id="hashes"),
        pytest.param({"colums": {}}, WriterError, r"Invalid Writer argument\(s\): \['colums'\]", id="unknown-kwarg"),
        pytest.param({"columns": {"x": "text"}}, UnknownEncodingError, "unknown encoding 'text'", id="encoding"),
        pytest.param(
            {"out": "ftp://bucket/x"},
            MDSError,
            r"ftp://bucket/x: unsupported URL scheme 'ftp'; use a local path, file://.*s3://",
            id="url-scheme",
        ),
    ],
)
def test_bad_arguments_are_refused(tmp_path: Path, options: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        MDSWriter(**{"out": str(tmp_path / "d"), "columns": COLUMNS, **options})


def test_exist_ok(tmp_path: Path) -> None:
    out = tmp_path / "d"
    _write(out, [{"id": 1, "payload": b""}])
    with pytest.raises(OutputExistsError, match=f"[Dd]irectory is not empty: {out}") as info:
        MDSWriter(out=str(out), columns=COLUMNS)
    assert isinstance(info.value, FileExistsError)
    with pytest.warns(UserWarning, match="removing the existing contents"):
        _write(out, [{"id": 2, "payload": b""}, {"id": 3, "payload": b""}], exist_ok=True)
    assert [s["id"] for s in LocalDataset(out)] == [2, 3]
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "empty", [{"id": 1, "payload": b""}])


def test_an_exception_inside_with_publishes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "d"
    with pytest.raises(RuntimeError, match="boom"):
        with MDSWriter(out=str(out), columns=COLUMNS, size_limit=200) as writer:
            for i in range(20):
                writer.write({"id": i, "payload": b"x" * 40})
            raise RuntimeError("boom")
    assert os.listdir(out) == []


def test_a_bad_sample_raises_and_loses_nothing_already_written(tmp_path: Path) -> None:
    out = tmp_path / "d"
    with MDSWriter(out=str(out), columns=COLUMNS) as writer:
        writer.write({"id": 0, "payload": b"ok"})
        with pytest.raises(MissingColumnError, match=r"missing column 'payload'; it has \['id'\]"):
            writer.write({"id": 1})
        with pytest.raises(EncodeError, match=r"column 'id' \(int\): encoding 'int' needs an int, got str"):
            writer.write({"id": "1", "payload": b""})
        writer.write({"id": 2, "payload": b"ok"})
    assert [s["id"] for s in LocalDataset(out)] == [0, 2]


def test_fixed_size_values_of_the_wrong_size_raise(tmp_path: Path) -> None:
    with MDSWriter(out=str(tmp_path / "d"), columns={"v": "ndarray:uint8:4", "n": "int32"}) as writer:
        with pytest.raises(EncodeError, match=r"column 'n' \(int32\) takes 4 bytes, got 3"):
            writer.write({"v": np.zeros(4, np.uint8), "n": b"abc"})
        writer.write({"v": b"abcd", "n": 1})  # pre-encoded bytes of the right size pass through


def test_extra_keys_are_ignored_and_zero_samples_write_an_empty_index(tmp_path: Path) -> None:
    _write(tmp_path / "a", [{"id": 1, "payload": b"", "unused": object()}])
    _write(tmp_path / "b", [])
    assert (tmp_path / "b" / "index.json").read_text() == '{"shards": [], "version": 2}'


@pytest.mark.parametrize(
    "write",
    [lambda w: w.write({"id": 1, "payload": b""}), lambda w: w.write_encoded_many(b"", [])],
    ids=["write", "write_encoded_many"],
)
def test_write_after_finish_raises(tmp_path: Path, write: Callable[[MDSWriter], None]) -> None:
    writer = MDSWriter(out=str(tmp_path / "d"), columns=COLUMNS)
    writer.finish()
    writer.finish()  # idempotent
    with pytest.raises(WriterError, match="is finished"):
        write(writer)


def test_a_shard_over_4_gib_raises_instead_of_wrapping_offsets(tmp_path: Path) -> None:
    big = bytes(1 << 31)  # calloc'd: untouched zero pages cost no memory
    with MDSWriter(out=str(tmp_path / "d"), columns={"payload": "bytes"}, size_limit=None) as writer:
        writer.write({"payload": big})
        with pytest.raises(ShardTooLargeError, match=r"shard 0 .* would pass 4 GiB .*size_limit"):
            writer.write({"payload": big})
        writer.abort()
    assert not (tmp_path / "d" / "index.json").exists()


def test_compressed_output_holds_only_compressed_files(tmp_path: Path) -> None:
    shards = _write(
        tmp_path / "d",
        [{"id": i, "payload": b"z" * 100} for i in range(50)],
        compression="zstd:7",
        size_limit=2000,
        hashes=["sha1", "xxh3_64"],
    )
    files = sorted(os.listdir(tmp_path / "d"))
    assert files == ["index.json"] + [f"shard.{i:05}.mds.zstd" for i in range(len(shards))]
    assert all(
        s["zip_data"]["basename"].endswith(".mds.zstd") and set(s["zip_data"]["hashes"]) == {"sha1", "xxh3_64"}
        for s in shards
    )
    assert [s["id"] for s in LocalDataset(tmp_path / "d")] == list(range(50))
