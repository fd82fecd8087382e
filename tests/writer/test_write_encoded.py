"""MDSWriter.write_encoded / write_encoded_many: the bulk path gives exactly the per-sample files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mds_core.writer.mds_writer
from mds_core import LocalDataset, MDSWriter
from mds_core.errors import ShardTooLargeError, WriterError
from mds_core.format.shard import Schema

COLUMNS = {"id": "int", "payload": "bytes"}


def _samples(lengths: list[int]) -> list[dict]:
    return [{"id": i, "payload": bytes([i % 251]) * n} for i, n in enumerate(lengths)]


def _files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in sorted(os.listdir(out))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.integers(0, 300), max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=6),
    size_limit=st.sampled_from([None, 1, 200, 700, 4000]),
    compression=st.sampled_from([None, "zstd", "gz"]),
    hashes=st.sampled_from([[], ["sha1"]]),
)
def test_bulk_writes_give_the_per_sample_files(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lengths: list[int],
    cuts: list[int],
    size_limit: int | None,
    compression: str | None,
    hashes: list[str],
) -> None:
    # Small compression chunks, so chunk cuts fall inside bulk runs and must match the per-sample ones.
    monkeypatch.setattr(mds_core.writer.mds_writer, "CHUNK_BYTES", 500)
    monkeypatch.setattr(mds_core.writer.mds_writer, "ZSTD_CHUNK_BYTES", 500)
    samples = _samples(lengths)
    schema = Schema.from_columns(COLUMNS)
    encoded = [schema.encode(sample) for sample in samples]
    run = os.urandom(4).hex()
    kwargs: dict[str, Any] = dict(columns=COLUMNS, size_limit=size_limit, compression=compression, hashes=hashes)
    with MDSWriter(out=str(tmp_path / f"one-{run}"), **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    with MDSWriter(out=str(tmp_path / f"bulk-{run}"), **kwargs) as writer:
        bounds = sorted({0, len(encoded), *[min(c, len(encoded)) for c in cuts]})
        for start, stop in zip(bounds, bounds[1:]):
            batch = encoded[start:stop]
            writer.write_encoded_many(b"".join(batch), [len(s) for s in batch])
    assert _files(tmp_path / f"bulk-{run}") == _files(tmp_path / f"one-{run}")
    assert [s["id"] for s in LocalDataset(tmp_path / f"bulk-{run}")] == list(range(len(samples)))


def test_write_encoded_takes_one_sample_as_is(tmp_path: Path) -> None:
    schema = Schema.from_columns(COLUMNS)
    with MDSWriter(out=str(tmp_path / "d"), columns=COLUMNS) as writer:
        writer.write_encoded(schema.encode({"id": 7, "payload": b"abc"}))
        writer.write_encoded_many(np.frombuffer(schema.encode({"id": 8, "payload": b""}), np.uint8), np.array([12]))
    assert [(s["id"], s["payload"]) for s in LocalDataset(tmp_path / "d")] == [(7, b"abc"), (8, b"")]


def test_sizes_that_do_not_add_up_are_refused(tmp_path: Path) -> None:
    with MDSWriter(out=str(tmp_path / "d"), columns=COLUMNS) as writer:
        with pytest.raises(
            WriterError, match=r"10 bytes of data do not split into the given 2 sample sizes \(total 12\)"
        ):
            writer.write_encoded_many(bytes(10), [6, 6])
        with pytest.raises(WriterError, match="do not split"):
            writer.write_encoded_many(bytes(10), [12, -2])
        writer.abort()
    assert not (tmp_path / "d" / "index.json").exists()


def test_bulk_refuses_a_shard_over_4_gib(tmp_path: Path) -> None:
    half = (1 << 31) + 4  # calloc'd zeros: untouched pages cost no memory
    data = np.zeros(2 * half, np.uint8)
    with MDSWriter(out=str(tmp_path / "d"), columns={"payload": "bytes"}, size_limit=None) as writer:
        with pytest.raises(ShardTooLargeError, match=r"shard 0 .* would pass 4 GiB"):
            writer.write_encoded_many(data, [half, half])
        writer.abort()
    assert not (tmp_path / "d" / "index.json").exists()


def test_a_shard_filled_exactly_to_the_limit_matches(tmp_path: Path) -> None:
    schema = Schema.from_columns(COLUMNS)
    encoded = [schema.encode(sample) for sample in _samples([20] * 10)]
    probe = MDSWriter(out=str(tmp_path / "probe"), columns=COLUMNS)
    size_limit = probe._shard_base + 3 * (len(encoded[0]) + 4)  # exactly three samples per shard
    probe.abort()
    with MDSWriter(out=str(tmp_path / "one"), columns=COLUMNS, size_limit=size_limit) as writer:
        for sample in encoded:
            writer.write_encoded(sample)
    with MDSWriter(out=str(tmp_path / "bulk"), columns=COLUMNS, size_limit=size_limit) as writer:
        writer.write_encoded_many(b"".join(encoded), [len(s) for s in encoded])
    assert [s["samples"] for s in json.loads((tmp_path / "one" / "index.json").read_text())["shards"]] == [3, 3, 3, 1]
    assert _files(tmp_path / "bulk") == _files(tmp_path / "one")
