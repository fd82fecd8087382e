"""LocalDataset: indexing, iteration, zero-copy views, decompression once, and DataLoader workers."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest

from mds_core import LocalDataset, MDSWriter
from mds_core.errors import MDSError, SampleIndexError

COLUMNS = {"id": "int", "tokens": "ndarray:uint16:8", "text": "str"}


def _dataset(out: Path, n: int = 50, **kwargs) -> Path:
    with MDSWriter(out=str(out), columns=COLUMNS, size_limit=kwargs.pop("size_limit", 400), **kwargs) as writer:
        for i in range(n):
            writer.write({"id": i, "tokens": np.full(8, i, np.uint16), "text": f"t{i}"})
    return out


def test_indexing_and_iteration(tmp_path: Path) -> None:
    ds = LocalDataset(_dataset(tmp_path / "d"))
    assert len(ds) == ds.num_samples == ds.size == 50 and len(ds.shards) > 3
    assert ds[0]["id"] == 0 and ds[-1]["id"] == 49 and ds[-50]["id"] == 0
    assert [s["id"] for s in ds[10:20:3]] == [10, 13, 16, 19]
    assert [s["id"] for s in ds[[3, 1, -1]]] == [3, 1, 49]
    assert [s["id"] for s in ds[np.array([5, 6])]] == [5, 6]
    assert ds[np.int64(7)]["text"] == "t7"
    assert [s["id"] for s in ds] == list(range(50))


@pytest.mark.parametrize("index", [50, -51, 10**9])
def test_out_of_range_raises_index_error(tmp_path: Path, index: int) -> None:
    ds = LocalDataset(_dataset(tmp_path / "d"))
    with pytest.raises(SampleIndexError, match="sample index .* is out of range for 50 samples") as info:
        ds[index]
    assert isinstance(info.value, IndexError)


def test_bad_index_type(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not str"):
        LocalDataset(_dataset(tmp_path / "d"))["a"]  # type: ignore[call-overload]  # wrong on purpose


def test_fixed_arrays_are_writable_copies_not_views_of_the_shard(tmp_path: Path) -> None:
    ds = LocalDataset(_dataset(tmp_path / "d"))
    tokens = ds[3]["tokens"]
    # A view of the read-only map would make torch warn; a writable view of it cannot exist.
    assert tokens.tolist() == [3] * 8 and tokens.flags.writeable and tokens.flags.owndata
    tokens[:] = 0
    assert ds[3]["tokens"].tolist() == [3] * 8


def test_split_and_missing_index(tmp_path: Path) -> None:
    _dataset(tmp_path / "root" / "train", 5)
    assert len(LocalDataset(tmp_path / "root", split="train")) == 5
    with pytest.raises(MDSError, match="no index.json here"):
        LocalDataset(tmp_path / "root")


def test_compressed_shards_are_decompressed_once_atomically(tmp_path: Path) -> None:
    out = _dataset(tmp_path / "d", compression="zstd")
    ds = LocalDataset(out)
    assert [s["id"] for s in ds] == list(range(50))
    raws = sorted(p for p in os.listdir(out) if p.endswith(".mds"))
    assert len(raws) == len(ds.shards)
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]
    mtimes = {p: os.stat(out / p).st_mtime_ns for p in raws}
    again = LocalDataset(out)
    assert [s["id"] for s in again] == list(range(50))
    assert {p: os.stat(out / p).st_mtime_ns for p in raws} == mtimes


def test_read_only_datasets_decompress_into_cache_dir(tmp_path: Path) -> None:
    out = _dataset(tmp_path / "d", compression="gz")
    os.chmod(out, stat.S_IRUSR | stat.S_IXUSR)
    try:
        ds = LocalDataset(out, cache_dir=tmp_path / "cache")
        assert [s["id"] for s in ds] == list(range(50))
        assert sorted(os.listdir(tmp_path / "cache")) == [f"shard.{i:05}.mds" for i in range(len(ds.shards))]
    finally:
        os.chmod(out, stat.S_IRWXU)


def test_pickles_without_open_maps(tmp_path: Path) -> None:
    ds = LocalDataset(_dataset(tmp_path / "d"))
    ds[10]
    clone = pickle.loads(pickle.dumps(ds))
    assert [s["id"] for s in clone] == list(range(50))
    ds.close()
    assert ds[0]["id"] == 0  # reopens after close


def test_works_under_a_dataloader_with_workers(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    ds = LocalDataset(_dataset(tmp_path / "d"))
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, shuffle=False)
    ids = [int(i) for batch in loader for i in batch["id"]]
    assert ids == list(range(50))


def test_take_decodes_many_samples_in_any_order_like_one_at_a_time(tmp_path: Path) -> None:
    reader = LocalDataset(_dataset(tmp_path / "d", size_limit=1 << 20)).shard_reader(0)
    order = np.random.default_rng(0).permutation(50)
    taken = reader.take(order)
    for index, sample in zip(order.tolist(), taken):
        single = reader[index]
        assert sample["id"] == single["id"] == index and sample["text"] == single["text"] == f"t{index}"
        assert np.array_equal(sample["tokens"], single["tokens"])
    assert [s["id"] for s in reader.take(np.array([7, 7, 0]))] == [7, 7, 0]


def test_take_names_the_corrupt_sample(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "d", size_limit=1 << 20)
    shard = root / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    offsets = np.frombuffer(bytes(data[4 : 4 * 52]), np.uint32)
    data[offsets[9] : offsets[9] + 4] = (10**6).to_bytes(4, "little")  # sample 9: its text size (the size table)
    shard.write_bytes(bytes(data))
    reader = LocalDataset(root).shard_reader(0)
    assert [s["id"] for s in reader.take(np.array([1, 2]))] == [1, 2]
    with pytest.raises(MDSError, match=r"shard\.00000\.mds: sample 9: "):
        reader.take(np.array([3, 9]))


def test_in_order_reading_reports_a_shard_truncated_under_it(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "d", size_limit=1 << 20)
    ds = LocalDataset(root)
    ds.shard_reader(0)  # opened (and checked) before the file shrinks
    shard = root / "shard.00000.mds"
    os.truncate(shard, shard.stat().st_size - 10)
    with pytest.raises(MDSError, match=r"shard\.00000\.mds: shrank while being read"):
        list(ds)


def test_a_shard_held_in_memory_iterates_from_memory(tmp_path: Path) -> None:
    from mds_core.format.shard import Schema, ShardReader

    root = _dataset(tmp_path / "d", size_limit=1 << 20)
    data = (root / "shard.00000.mds").read_bytes()
    reader = ShardReader(data, str(tmp_path / "not-a-file.mds"), Schema.from_columns(COLUMNS), 50, len(data))
    assert [s["id"] for s in reader] == list(range(50))
