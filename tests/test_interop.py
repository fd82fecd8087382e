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
from tests.golden import CASES, assert_same, untag, write_case

ROOT = Path(__file__).resolve().parent.parent
REF_PYTHON = ROOT / "benchmarks" / ".venv" / "bin" / "python"
pytestmark = pytest.mark.skipif(not REF_PYTHON.exists(), reason="needs the reference: run `make interop`")


def _ref_dump(*args: str, timeout: float) -> str:
    """tests/interop/ref_dump.py's standard output, run by the reference's Python."""
    command = [str(REF_PYTHON), str(ROOT / "tests/interop/ref_dump.py"), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _samples(jsonl: str) -> list[dict]:
    return [{k: untag(v) for k, v in json.loads(line).items()} for line in jsonl.splitlines()]


def _reference_reads(path: Path, *flags: str) -> list[dict]:
    return _samples(_ref_dump(str(path), *flags, timeout=600))


def reference_reads_many(jobs: dict[str, dict]) -> dict[str, list[dict]]:
    """What the reference reads from each dataset, in one reference process (its imports take seconds).

    ``jobs``: name -> {"path", and optionally "allow_unsafe_types", "validate_hash", "index"}."""
    listing, outs = [], {}
    for name, job in jobs.items():
        outs[name] = Path(job["path"]).parent / f"{Path(job['path']).name}.reference.jsonl"
        listing.append({**job, "path": str(job["path"]), "out": str(outs[name])})
    spec = outs[next(iter(outs))].parent / "reference-jobs.json"
    spec.write_text(json.dumps(listing))
    _ref_dump("--many", str(spec), timeout=900)
    return {name: _samples(out.read_text()) for name, out in outs.items()}


def _assert_same_as_ours(path: Path, theirs: list[dict]) -> None:
    ours = list(LocalDataset(path, allow_unsafe_types=True, cache_dir=path.parent / f"{path.name}-cache"))
    assert len(theirs) == len(ours)
    for i, (a, b) in enumerate(zip(theirs, ours)):
        assert_same(a, b, f"{path.name}[{i}]")


GOLDEN_CASES = [c for c in CASES if c["num_samples"] and c["name"] != "merged"]
MULTI_FRAME = ["zstd", "gz", "bz2"]


def _write_case(out: Path, case: dict) -> dict:
    hashes = case["writer_kwargs"].get("hashes")
    path = write_case(case["name"], out)
    return {
        "path": path,
        "allow_unsafe_types": case["allow_unsafe_types"],
        "validate_hash": hashes[0] if hashes else None,
    }


def _write_multi_frame(out: Path, compression: str) -> dict:
    """Shards bigger than one compression chunk hold several concatenated frames/members/streams."""
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
    return {"path": out, "validate_hash": "xxh64"}


@pytest.fixture(scope="module")
def reference_reads_ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict]]]:
    """Every dataset below written by us, then read by the reference in one process: name -> (path, its samples)."""
    base = tmp_path_factory.mktemp("interop")
    jobs = {case["name"]: _write_case(base / case["name"], case) for case in GOLDEN_CASES}
    jobs |= {f"multi-{c}": _write_multi_frame(base / f"multi-{c}", c) for c in MULTI_FRAME}
    theirs = reference_reads_many(jobs)
    return {name: (Path(job["path"]), theirs[name]) for name, job in jobs.items()}


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: c["name"])
def test_reference_reads_every_golden_case_we_write(reference_reads_ours: dict, case: dict) -> None:
    _assert_same_as_ours(*reference_reads_ours[case["name"]])


@pytest.mark.parametrize("compression", MULTI_FRAME)
def test_reference_reads_our_multi_frame_shards(reference_reads_ours: dict, compression: str) -> None:
    _assert_same_as_ours(*reference_reads_ours[f"multi-{compression}"])
