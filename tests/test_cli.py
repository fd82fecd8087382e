"""The `mds` command, run as a real subprocess through its console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mds_core import MDSWriter

MDS = [os.path.join(os.path.dirname(sys.executable), "mds")]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MDS, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    out = tmp_path / "d"
    with MDSWriter(
        out=str(out),
        columns={"id": "int", "tok": "ndarray:uint16:16", "txt": "str"},
        compression="zstd",
        hashes=["sha1", "xxh3_64"],
        size_limit=2000,
    ) as writer:
        for i in range(40):
            writer.write({"id": i, "tok": np.arange(16, dtype=np.uint16) + i, "txt": "hello " * i})
    return out


def test_inspect(dataset: Path) -> None:
    result = _run("inspect", str(dataset))
    assert result.returncode == 0, result.stderr
    assert "samples      40" in result.stdout and "with zstd" in result.stdout and "ratio" in result.stdout
    assert "tok  ndarray:uint16:16" in result.stdout
    summary = json.loads(_run("inspect", str(dataset), "--json").stdout)
    index = json.loads((dataset / "index.json").read_text())["shards"]
    assert summary["shards"] == len(index) and summary["samples"] == 40
    assert summary["raw_bytes"] == sum(s["raw_data"]["bytes"] for s in index)
    assert summary["zip_bytes"] == sum(s["zip_data"]["bytes"] for s in index)


def test_verify_ok_then_names_the_bad_shard(dataset: Path) -> None:
    ok = _run("verify", str(dataset), "--decode")
    assert ok.returncode == 0 and ok.stdout.startswith("OK:")
    bad = dataset / "shard.00002.mds.zstd"
    data = bytearray(bad.read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    result = _run("verify", str(dataset))
    assert result.returncode == 1 and result.stderr == ""
    # Issue 40, item 15: the cause first, the summary last, on one stream (so in this order wherever it goes).
    cause, summary = result.stdout.splitlines()
    assert cause.startswith(f"FAIL shard 2: {bad}: ")
    assert summary.startswith("FAILED (1 problem): ") and summary.endswith(f"samples checked in {dataset}")
    (dataset / "shard.00000.mds.zstd").write_bytes(b"")
    two = _run("verify", str(dataset)).stdout.splitlines()
    assert [line.split(":")[0] for line in two] == ["FAIL shard 0", "FAIL shard 2", "FAILED (2 problems)"]


def test_verify_names_a_urls_files_by_their_url(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/d"
    with MDSWriter(out=url, columns={"id": "int"}, size_limit=100) as writer:
        for i in range(20):
            writer.write({"id": i})
    import boto3

    client = boto3.client("s3", endpoint_url=s3_server.endpoint)
    bucket, key = url[5:].split("/", 1)
    client.put_object(Bucket=bucket, Key=f"{key}/shard.00001.mds", Body=b"short")
    result = _run("verify", url)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith(f"FAIL shard 1: {url}/shard.00001.mds: 5 bytes but the index says")
    assert "mds-cli-" not in result.stdout  # not the temporary copy


def test_head(dataset: Path) -> None:
    result = _run("head", str(dataset), "-n", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:3] == [
        "[0]",
        "  id: 0",
        "  tok: ndarray uint16 (16,) [0, 1, 2, 3, 4, 5, 6, 7, ...]",
    ]
    assert "[2]" not in result.stdout


def test_errors_are_one_line_with_status_2(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text("{oops")
    result = _run("head", str(tmp_path))
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
