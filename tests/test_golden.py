"""Compatibility with the reference's own output (tests/fixtures/mds-golden)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mds_core import LocalDataset, MDSWriter, merge_index
from mds_core.errors import UnsafeEncodingError
from mds_core.format.compression import get_codec
from tests.golden import CASE_NAMES, CASES, GOLDEN, assert_same, case, read_jsonl

BYTES_EQUAL = [c["name"] for c in CASES if c["writer_bytes_equal"] and c["name"] != "merged"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_reads_every_case_like_the_reference(name: str, golden_copy) -> None:
    meta = case(name)
    expected = read_jsonl("expected", name)
    ds = LocalDataset(golden_copy(name), allow_unsafe_types=meta["allow_unsafe_types"])
    assert len(ds) == meta["num_samples"] == len(expected)
    assert len(ds.shards) == meta["num_shards"]
    for i, want in enumerate(expected):
        assert_same(ds[i], want, f"{name}[{i}]")
    for i, got in enumerate(ds):
        assert_same(got, expected[i], f"{name} iter[{i}]")


def test_pkl_is_refused_without_allow_unsafe_types(golden_copy) -> None:
    with pytest.raises(UnsafeEncodingError, match=r"Column obj contains an unsafe type: pkl.*allow_unsafe_types=True"):
        LocalDataset(golden_copy("pkl_unsafe"))


def _write_case(name: str, out: Path) -> None:
    meta = case(name)
    with MDSWriter(out=str(out), columns=meta["columns"], **meta["writer_kwargs"]) as writer:
        for sample in read_jsonl("samples", name):
            writer.write(sample)


@pytest.mark.parametrize("name", BYTES_EQUAL)
def test_writer_reproduces_reference_bytes(name: str, tmp_path: Path) -> None:
    _write_case(name, tmp_path / name)
    ref_dir, our_dir = GOLDEN / "datasets" / name, tmp_path / name
    ref_index = json.loads((ref_dir / "index.json").read_text())
    our_index = json.loads((our_dir / "index.json").read_text())
    if not case(name)["writer_kwargs"].get("compression"):
        assert sorted(os.listdir(our_dir)) == sorted(os.listdir(ref_dir))
        for file in os.listdir(ref_dir):
            assert (our_dir / file).read_bytes() == (ref_dir / file).read_bytes(), file
        return
    # Compressed bytes depend on the compressor build: compare everything else exactly.
    for ours, ref in zip(our_index["shards"], ref_index["shards"], strict=True):
        assert ours["zip_data"]["basename"] == ref["zip_data"]["basename"]
        ours["zip_data"] = ref["zip_data"] = None
        assert ours == ref
        codec = get_codec(ref["compression"])
        assert codec is not None, ref["compression"]
        raw_ours = codec.decompress(
            (our_dir / ref["raw_data"]["basename"]).with_suffix(f".mds.{codec.extension}").read_bytes()
        )
        raw_ref = codec.decompress((ref_dir / f"{ref['raw_data']['basename']}.{codec.extension}").read_bytes())
        assert raw_ours == raw_ref
    assert sorted(os.listdir(our_dir)) == sorted(os.listdir(ref_dir))


def test_merge_reproduces_reference_bytes(tmp_path: Path) -> None:
    meta = case("merged")
    samples = read_jsonl("samples", "merged")
    root = tmp_path / "merged"
    parts = meta["writer_kwargs"]["partitions"]
    per_part = [len(json.loads((GOLDEN / "datasets/merged" / p / "index.json").read_text())["shards"]) for p in parts]
    kwargs = {k: v for k, v in meta["writer_kwargs"].items() if k != "partitions"}
    start = 0
    for part in parts:
        ref_part = json.loads((GOLDEN / "datasets/merged" / part / "index.json").read_text())
        count = sum(s["samples"] for s in ref_part["shards"])
        with MDSWriter(out=str(root / part), columns=meta["columns"], **kwargs) as writer:
            for sample in samples[start : start + count]:
                writer.write(sample)
        start += count
    assert per_part == [len(json.loads((root / p / "index.json").read_text())["shards"]) for p in parts]
    merge_index(str(root))
    for path in sorted(p.relative_to(GOLDEN / "datasets/merged") for p in (GOLDEN / "datasets/merged").rglob("*")):
        if (GOLDEN / "datasets/merged" / path).is_file():
            assert (root / path).read_bytes() == (GOLDEN / "datasets/merged" / path).read_bytes(), path
