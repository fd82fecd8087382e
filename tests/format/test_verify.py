"""``mds verify`` reads in chunks: sizes before bytes, digests as it goes, decompression bounded by the index."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from mds_core import MDSWriter, cli
from mds_core.format.verify import Report, verify_dataset


def _write(out: Path, n: int, **kwargs) -> Path:
    columns = kwargs.pop("columns", {"id": "int", "blob": "bytes"})
    with MDSWriter(out=str(out), columns=columns, **kwargs) as writer:
        rng = np.random.default_rng(0)
        for i in range(n):
            sample = {"id": i, "blob": rng.integers(0, 4, 4096, dtype=np.uint8).tobytes()}
            writer.write({name: sample.get(name, {"i": i}) for name in columns})
    return out


def _verify_traced(root: Path, **kwargs) -> tuple[Report, int]:
    """``verify_dataset``'s report and the peak of the Python memory it allocated."""
    tracemalloc.start()
    try:
        return verify_dataset(str(root), **kwargs), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_decode_counts_the_pkl_samples_it_leaves_undecoded(tmp_path: Path) -> None:
    root = _write(tmp_path / "d", 30, columns={"id": "int", "meta": "pkl"}, size_limit=400)
    report = verify_dataset(str(root), decode=True)
    assert report.ok and report.samples_checked == 30 and report.samples_not_decoded == 30
    assert verify_dataset(str(root), decode=True, allow_unsafe_types=True).samples_not_decoded == 0
    assert verify_dataset(str(root)).samples_not_decoded == 0  # nothing is decoded without --decode
    result = CliRunner().invoke(cli.main, ["verify", "--decode", str(root)])
    assert result.exit_code == 0, result.output
    assert "30 samples not decoded (pkl columns; --allow-unsafe-types decodes them)" in result.output
    result = CliRunner().invoke(cli.main, ["verify", "--decode", "--allow-unsafe-types", str(root)])
    assert result.exit_code == 0 and "not decoded" not in result.output


def test_a_file_of_the_wrong_size_is_reported_before_it_is_read(tmp_path: Path) -> None:
    root = _write(tmp_path / "d", 10, hashes=["sha256"])
    shard = root / "shard.00000.mds"
    declared = json.loads((root / "index.json").read_text())["shards"][0]["raw_data"]["bytes"]
    os.truncate(shard, 64 << 30)  # 64 GiB, sparse: reading it would take minutes
    report, peak = _verify_traced(root)
    assert report.problems == [
        f"shard 0: {shard}: {64 << 30} bytes but the index says {declared} (truncated or replaced)"
    ]
    assert report.hashes_checked == 0 and peak < 1 << 20


def test_a_compressed_shard_is_checked_a_chunk_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """Above ``_IN_MEMORY_BYTES`` (16 MiB; 1 MiB here, to keep the test small) a shard goes through a mapped scratch file."""
    root = _write(tmp_path / "d", 2500, compression="zstd", hashes=["sha1", "xxh64"], size_limit="64mb")
    entry = json.loads((root / "index.json").read_text())["shards"][0]
    assert entry["raw_data"]["bytes"] > 8 << 20 and entry["raw_data"]["hashes"]

    def peak_of_verify() -> int:
        report, peak = _verify_traced(root, decode=True)
        assert report.ok, report.problems
        assert report.files_checked == 2 and report.hashes_checked == 4 and report.samples_checked == 2500
        return peak

    assert peak_of_verify() > entry["raw_data"]["bytes"]  # checked in memory: the whole raw shard
    monkeypatch.setattr("mds_core.format.verify._IN_MEMORY_BYTES", 1 << 20)
    peak = peak_of_verify()
    assert peak < 4 << 20, f"{peak:,} bytes at the peak for a {entry['raw_data']['bytes']:,}-byte shard"
    assert not list(root.glob("*.mds")) and not list(root.glob("*.tmp"))  # the scratch copy is not left behind
