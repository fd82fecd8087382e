"""LocalDataset: indexing, iteration, zero-copy views, decompression once, and DataLoader workers."""

from __future__ import annotations

import os
import pickle
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mds_core import LocalDataset
from mds_core.errors import MDSError, SampleIndexError
from mds_core.format.shard import MIN_TAKE_BLOCK, Schema, ShardReader
from tests.streaming.support import ids, write_rows

COLUMNS = {"id": "int", "tokens": "ndarray:uint16:8", "text": "str"}


def _dataset(out: Path, n: int = 50, **kwargs) -> Path:
    rows = ({"id": i, "tokens": np.full(8, i, np.uint16), "text": f"t{i}"} for i in range(n))
    return write_rows(out, COLUMNS, rows, **{"size_limit": 400, **kwargs})


@pytest.fixture
def ds(tmp_path: Path) -> LocalDataset:
    """50 samples in shards of a few samples."""
    return LocalDataset(_dataset(tmp_path / "d"))


@pytest.fixture
def one_shard(tmp_path: Path) -> Path:
    """50 samples in one shard."""
    return _dataset(tmp_path / "d", size_limit=1 << 20)


def test_indexing_and_iteration(ds: LocalDataset) -> None:
    assert len(ds) == ds.num_samples == ds.size == 50 and len(ds.shards) > 3
    assert ds[0]["id"] == 0 and ds[-1]["id"] == 49 and ds[-50]["id"] == 0
    assert [s["id"] for s in ds[10:20:3]] == [10, 13, 16, 19]
    assert [s["id"] for s in ds[[3, 1, -1]]] == [3, 1, 49]
    assert [s["id"] for s in ds[np.array([5, 6])]] == [5, 6]
    assert ds[np.int64(7)]["text"] == "t7"
    assert ids(ds) == list(range(50))


@pytest.mark.parametrize("index", [50, -51, 10**9])
def test_out_of_range_raises_index_error(ds: LocalDataset, index: int) -> None:
    with pytest.raises(SampleIndexError, match="sample index .* is out of range for 50 samples") as info:
        ds[index]
    assert isinstance(info.value, IndexError)


def test_bad_index_type(ds: LocalDataset) -> None:
    with pytest.raises(TypeError, match="not str"):
        ds["a"]  # type: ignore[call-overload]  # wrong on purpose


def test_fixed_arrays_are_writable_copies_not_views_of_the_shard(ds: LocalDataset) -> None:
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
    assert ids(ds) == list(range(50))
    raws = sorted(p for p in os.listdir(out) if p.endswith(".mds"))
    assert len(raws) == len(ds.shards)
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]
    mtimes = {p: os.stat(out / p).st_mtime_ns for p in raws}
    again = LocalDataset(out)
    assert ids(again) == list(range(50))
    assert {p: os.stat(out / p).st_mtime_ns for p in raws} == mtimes


def test_read_only_datasets_decompress_into_cache_dir(tmp_path: Path) -> None:
    out = _dataset(tmp_path / "d", compression="gz")
    os.chmod(out, stat.S_IRUSR | stat.S_IXUSR)
    try:
        ds = LocalDataset(out, cache_dir=tmp_path / "cache")
        assert ids(ds) == list(range(50))
        assert sorted(os.listdir(tmp_path / "cache")) == [f"shard.{i:05}.mds" for i in range(len(ds.shards))]
    finally:
        os.chmod(out, stat.S_IRWXU)


def test_pickles_without_open_maps(ds: LocalDataset) -> None:
    ds[10]
    assert ids(pickle.loads(pickle.dumps(ds))) == list(range(50))
    ds.close()
    assert ds[0]["id"] == 0  # reopens after close


def test_works_under_a_dataloader_with_workers(ds: LocalDataset) -> None:
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, shuffle=False)
    assert [int(i) for batch in loader for i in batch["id"]] == list(range(50))


def test_take_decodes_many_samples_in_any_order_like_one_at_a_time(one_shard: Path) -> None:
    reader = LocalDataset(one_shard).shard_reader(0)
    order = np.random.default_rng(0).permutation(50)
    taken = reader.take(order)
    for index, sample in zip(order.tolist(), taken):
        single = reader[index]
        assert sample["id"] == single["id"] == index and sample["text"] == single["text"] == f"t{index}"
        assert np.array_equal(sample["tokens"], single["tokens"])
    assert ids(reader.take(np.array([7, 7, 0]))) == [7, 7, 0]


def test_a_few_samples_of_a_shard_are_decoded_one_at_a_time(one_shard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A shuffled block spread over many shards has a few samples in each: a column-wise decode per shard cost
    # 50-100 µs whatever its size, 20x a sample's decode, and made an epoch over 104 shards 3.5x slower.
    reader = LocalDataset(one_shard).shard_reader(0)
    order = np.random.default_rng(1).permutation(50)[:MIN_TAKE_BLOCK]
    expected = [reader[i] for i in order.tolist()]
    calls: list[int] = []
    block_decode = Schema.decode_block

    def counted(schema: Schema, buf: Any, u8: np.ndarray, begins: np.ndarray, *rest: Any) -> list[dict[str, Any]]:
        calls.append(len(begins))
        return block_decode(schema, buf, u8, begins, *rest)

    monkeypatch.setattr(Schema, "decode_block", counted)
    for count in (1, MIN_TAKE_BLOCK - 1, MIN_TAKE_BLOCK):
        taken = reader.take(order[:count])
        assert ids(taken) == order[:count].tolist()
        assert all(
            np.array_equal(t["tokens"], e["tokens"]) and t["tokens"].flags.writeable for t, e in zip(taken, expected)
        )
    assert calls == [MIN_TAKE_BLOCK]  # only the group of MIN_TAKE_BLOCK went column by column


def test_an_open_shard_keeps_no_copy_of_its_offsets(tmp_path: Path) -> None:
    rows = ({"id": i, "tokens": np.zeros(8, np.uint16), "text": ""} for i in range(100_000))
    reader = LocalDataset(write_rows(tmp_path / "d", COLUMNS, rows, size_limit=1 << 26)).shard_reader(0)
    tracemalloc.start()
    try:
        wanted = [99_999, *range(MIN_TAKE_BLOCK)]  # enough for the column-wise decode, which reads the offsets
        assert ids(reader.take(np.array(wanted))) == wanted
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # An int64 copy of the 100,001 offsets would keep 800 kB for as long as the shard is open (in a worker
    # that reads every shard of 10⁸ samples: 0.8 GB); the reader keeps views of its map.
    assert kept < 50_000


def test_take_names_the_corrupt_sample(one_shard: Path) -> None:
    shard = one_shard / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    offsets = np.frombuffer(bytes(data[4 : 4 * 52]), np.uint32)
    data[offsets[9] : offsets[9] + 4] = (10**6).to_bytes(4, "little")  # sample 9: its text size (the size table)
    shard.write_bytes(bytes(data))
    reader = LocalDataset(one_shard).shard_reader(0)
    others = np.delete(np.arange(50), 9)  # column by column (MIN_TAKE_BLOCK or more), as is the next take
    assert ids(reader.take(others)) == others.tolist()
    with pytest.raises(MDSError, match=r"shard\.00000\.mds: sample 9: "):
        reader.take(np.arange(3, 50))


def test_in_order_reading_reports_a_shard_truncated_under_it(one_shard: Path) -> None:
    ds = LocalDataset(one_shard)
    ds.shard_reader(0)  # opened (and checked) before the file shrinks
    shard = one_shard / "shard.00000.mds"
    os.truncate(shard, shard.stat().st_size - 10)
    with pytest.raises(MDSError, match=r"shard\.00000\.mds: shrank while being read"):
        list(ds)


def test_a_shard_held_in_memory_iterates_from_memory(one_shard: Path) -> None:
    data = (one_shard / "shard.00000.mds").read_bytes()
    reader = ShardReader(data, str(one_shard / "not-a-file.mds"), Schema.from_columns(COLUMNS), 50, len(data))
    assert ids(reader) == list(range(50))


def test_take_keys_samples_by_column_names_that_look_like_code_without_running_them(tmp_path: Path) -> None:
    # Each sample's dict comes from code compiled for the schema's names: a name reaches it as a value, never as text.
    marker = tmp_path / "ran"
    names = [f"__import__('os').system('touch {marker}')", "k0", "v0", "a'b\"c}"]
    columns = dict(zip(names, ["int", "bytes", "str", "ndarray:uint8:2"], strict=True))
    rows = (
        {names[0]: i, names[1]: bytes([i]) * 3, names[2]: f"t{i}", names[3]: np.full(2, i, np.uint8)} for i in range(40)
    )
    reader = LocalDataset(write_rows(tmp_path / "d", columns, rows, size_limit=1 << 20)).shard_reader(0)
    order = [5, 0, 39, *range(10, 10 + MIN_TAKE_BLOCK)]  # enough for the column-wise decode, which builds the dicts
    taken = reader.take(np.array(order))
    assert [sorted(sample) for sample in taken] == [sorted(names)] * len(order)
    assert [(s[names[0]], s[names[1]], s[names[2]], s[names[3]].tolist()) for s in taken] == [
        (i, bytes([i]) * 3, f"t{i}", [i, i]) for i in order
    ]
    assert not marker.exists()


def test_take_names_the_sample_and_column_of_text_that_is_not_utf8(one_shard: Path) -> None:
    shard = one_shard / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    offsets = np.frombuffer(bytes(data[4 : 4 * 52]), np.uint32)
    data[offsets[12] - 17] = 0xFF  # sample 11's text ("t11") ends before its 16 bytes of tokens (columns sorted)
    shard.write_bytes(bytes(data))
    reader = LocalDataset(one_shard).shard_reader(0)
    others = np.delete(np.arange(50), 11)  # column by column (MIN_TAKE_BLOCK or more), as is the next take
    assert [sample["text"] for sample in reader.take(others)] == [f"t{i}" for i in others.tolist()]
    with pytest.raises(MDSError, match=r"shard\.00000\.mds: sample 11: column 'text': 'str' value is not valid UTF-8"):
        reader.take(np.arange(3, 50))
