"""The reference (Mosaic Streaming 0.13, in benchmarks/.venv) reads what our writer writes.

The golden fixtures prove the other direction. These tests need the benchmark environment
(`make bench-env`); `make interop` builds it and runs them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mds_core import LocalDataset, MDSWriter
from tests.golden import CASES, assert_same, read_jsonl, untag

ROOT = Path(__file__).resolve().parent.parent
REF_PYTHON = ROOT / "benchmarks" / ".venv" / "bin" / "python"
pytestmark = pytest.mark.skipif(not REF_PYTHON.exists(), reason="needs the reference: run `make interop`")


def _reference_reads(path: Path, *flags: str) -> list[dict]:
    result = subprocess.run(
        [str(REF_PYTHON), str(ROOT / "tests/interop/ref_dump.py"), str(path), *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [{k: untag(v) for k, v in json.loads(line).items()} for line in result.stdout.splitlines()]


def _assert_reference_matches_us(path: Path, *flags: str) -> None:
    ours = list(LocalDataset(path, allow_unsafe_types=True, cache_dir=path.parent / f"{path.name}-cache"))
    theirs = _reference_reads(path, *flags)
    assert len(theirs) == len(ours)
    for i, (a, b) in enumerate(zip(theirs, ours)):
        assert_same(a, b, f"{path.name}[{i}]")


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["num_samples"] and c["name"] != "merged"], ids=lambda c: c["name"]
)
def test_reference_reads_every_golden_case_we_write(tmp_path: Path, case: dict) -> None:
    out = tmp_path / case["name"]
    with MDSWriter(out=str(out), columns=case["columns"], **case["writer_kwargs"]) as writer:
        for sample in read_jsonl("samples", case["name"]):
            writer.write(sample)
    flags = ["--allow-unsafe-types"] if case["allow_unsafe_types"] else []
    if case["writer_kwargs"].get("hashes"):
        flags += ["--validate-hash", case["writer_kwargs"]["hashes"][0]]
    _assert_reference_matches_us(out, *flags)


@pytest.mark.parametrize("compression", ["zstd", "gz", "bz2"])
def test_reference_reads_our_multi_frame_shards(tmp_path: Path, compression: str) -> None:
    """Shards bigger than one compression chunk hold several concatenated frames/members/streams."""
    out = tmp_path / compression
    rng = np.random.default_rng(0)
    with MDSWriter(
        out=str(out),
        columns={"id": "int", "tokens": "ndarray:uint16:2048"},
        compression=compression,
        hashes=["xxh64"],
        size_limit="12mb",
    ) as writer:
        for i in range(4000):
            writer.write({"id": i, "tokens": rng.integers(0, 1000, 2048, dtype=np.uint16)})
    index = json.loads((out / "index.json").read_text())["shards"]
    assert index[0]["raw_data"]["bytes"] > 2 * (4 << 20)  # several chunks per shard
    _assert_reference_matches_us(out, "--validate-hash", "xxh64")
