"""Compatibility with the reference's own output (tests/fixtures/mds-golden)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mds_core import LocalDataset, MDSWriter, merge_index
from mds_core.errors import UnsafeEncodingError
from mds_core.format.compression import get_codec
from tests.golden import CASE_NAMES, CASES, GOLDEN, assert_same, case, read_jsonl, write_case

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


@pytest.mark.parametrize("name", BYTES_EQUAL)
def test_writer_reproduces_reference_bytes(name: str, tmp_path: Path) -> None:
    ref_dir, our_dir = GOLDEN / "datasets" / name, write_case(name, tmp_path / name)
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
    meta, ref, root = case("merged"), GOLDEN / "datasets" / "merged", tmp_path / "merged"
    samples = read_jsonl("samples", "merged")
    kwargs = {k: v for k, v in meta["writer_kwargs"].items() if k != "partitions"}
    start = 0
    for part in meta["writer_kwargs"]["partitions"]:
        ref_shards = json.loads((ref / part / "index.json").read_text())["shards"]
        count = sum(s["samples"] for s in ref_shards)
        with MDSWriter(out=str(root / part), columns=meta["columns"], **kwargs) as writer:
            for sample in samples[start : start + count]:
                writer.write(sample)
        start += count
        assert len(json.loads((root / part / "index.json").read_text())["shards"]) == len(ref_shards), part
    merge_index(str(root))
    for path in sorted(p.relative_to(ref) for p in ref.rglob("*") if p.is_file()):
        assert (root / path).read_bytes() == (ref / path).read_bytes(), path
