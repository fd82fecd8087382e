"""Decoded arrays are writable and the caller's: torch never warns "The given NumPy array is not writable",
and a write into a sample's array never reaches the shard file, another sample, or a later read.

The loader checks run in a fresh interpreter with every warning an error: torch warns once per process,
so a warning already given in this test session would hide one given here, in this process or in a
DataLoader worker forked from it.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mds_core import LocalDataset, StreamingDataset
from mds_core.format.shard import MIN_TAKE_BLOCK
from tests.streaming.support import memory_owner, run, write_rows

COLUMNS = {"id": "int", "fixed": "ndarray:float32:16", "free": "ndarray", "typed": "ndarray:int16", "text": "str"}
NUM_SAMPLES = 300


def sample(i: int) -> dict:
    return {
        "id": i,
        "fixed": np.full(16, i, np.float32),
        "free": np.full((2, 3), i, np.int64),
        "typed": np.full(5, i, np.int16),
        "text": f"doc {i}",
    }


def write_dataset(out: Path) -> Path:
    return write_rows(out, COLUMNS, map(sample, range(NUM_SAMPLES)), size_limit="8kb")  # several shards


def shard_digests(root: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(root.glob("*.mds"))}


def assert_intact(samples: list[dict]) -> None:
    for got in samples:
        want = sample(got["id"])
        for name in ("fixed", "free", "typed"):
            assert np.array_equal(got[name], want[name]), (got["id"], name)


LOADER_EPOCHS = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("error")  # the "not writable" UserWarning, here and in the forked workers
    # Only on a machine with fewer than 2 cores: torch's advice about the worker count.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    import torch
    from torch.utils.data import DataLoader, default_collate
    from mds_core import LocalDataset, StreamingDataLoader, StreamingDataset

    root, jobs = sys.argv[1], sys.argv[2]
    def streaming(name):
        return StreamingDataset(local=root, batch_size=16, shuffle=True, job_root=f"{jobs}/{name}")
    loaders = {
        "StreamingDataLoader, 2 workers": StreamingDataLoader(streaming("a"), batch_size=16, num_workers=2),
        "StreamingDataLoader, default_collate": StreamingDataLoader(
            streaming("b"), batch_size=16, num_workers=2, collate_fn=default_collate),
        "DataLoader, 0 workers": DataLoader(streaming("c"), batch_size=16, num_workers=0),
        "DataLoader, 2 workers": DataLoader(streaming("d"), batch_size=16, num_workers=2),
        "DataLoader, 2 workers, unbatched": DataLoader(streaming("e"), batch_size=None, num_workers=2),
        "DataLoader over LocalDataset, shuffled": DataLoader(LocalDataset(root), batch_size=16, shuffle=True),
    }
    for name, loader in loaders.items():
        ids = []
        for batch in loader:
            batch["fixed"].add_(1)  # tensors sharing a sample's memory must be writable too
            ids += torch.as_tensor(batch["id"]).reshape(-1).tolist()  # an int when unbatched
        assert sorted(ids) == list(range(int(sys.argv[3]))), name
        print("ok:", name)
""")


def test_loaders_never_warn_that_an_array_is_not_writable(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "data")
    done = run(sys.executable, "-W", "error", "-c", LOADER_EPOCHS, str(root), str(tmp_path / "jobs"), str(NUM_SAMPLES))
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("ok:") == 6, done.stdout


def read_all(root: Path, path: str, jobs: Path) -> Callable[[], list[dict]]:
    """Every sample, read one way; each call reads again with the same open readers (a later epoch)."""
    if path == "shuffled take":
        dataset = StreamingDataset(local=str(root), batch_size=16, shuffle=True, job_root=str(jobs))
        return lambda: list(dataset)
    local = LocalDataset(str(root))
    if path == "random access":
        return lambda: [local[i] for i in range(NUM_SAMPLES)]
    return lambda: list(local)


@pytest.mark.parametrize("path", ["shuffled take", "random access", "in-order"])
def test_writing_into_a_sample_reaches_neither_the_shard_nor_a_later_read(tmp_path: Path, path: str) -> None:
    root = write_dataset(tmp_path / "data")
    before = shard_digests(root)
    read = read_all(root, path, tmp_path / "jobs")
    first = read()
    assert all(s[name].flags.writeable for s in first for name in ("fixed", "free", "typed"))
    for s in first[::2]:  # every other sample: its neighbours, decoded from the same block, must not change
        s["fixed"][:] = -1
        s["free"] += 1000
        s["typed"][0] = -7
    assert_intact(first[1::2])
    assert_intact(read())
    assert shard_digests(root) == before


@pytest.mark.parametrize(
    "read",
    [lambda ds: [ds[i] for i in range(NUM_SAMPLES)], lambda ds: ds.shard_reader(0).take(np.arange(MIN_TAKE_BLOCK))],
    ids=["random access", "take"],
)
def test_a_reader_that_never_writes_gets_read_only_views_of_the_shard(tmp_path: Path, read: Callable) -> None:
    root = write_dataset(tmp_path / "data")
    samples = read(LocalDataset(str(root), writable=False))
    assert_intact(samples)
    for s in samples:
        for name in ("fixed", "free", "typed"):
            assert not s[name].flags.writeable, (s["id"], name)
            assert memory_owner(s[name]) is not None, (s["id"], name)  # it views the map: no copy was made
            with pytest.raises(ValueError, match="read-only"):
                s[name][0] = 0
