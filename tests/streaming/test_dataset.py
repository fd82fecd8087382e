"""StreamingDataset end to end over the reference's order fixtures, in one process."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mds_core import Stream, StreamingDataLoader, StreamingDataset
from mds_core.errors import ConfigurationError, MDSError, ResumeError
from mds_core.order import OrderSpec
from mds_core.streaming.arrival import block_bounds, decode_block_size
from tests.streaming.support import FIXTURES, ORDER, batch_ids, first_batches, ids, run_python, three_streams, write_ids

S0 = str(ORDER / "datasets" / "s0")
EPOCHS = json.loads((ORDER / "epochs.json").read_text())["cases"]
SINGLE = [c for c in EPOCHS if c["world"] == {"num_nodes": 1, "ranks_per_node": 1, "workers_per_rank": 1}]


def _dataset(case: dict, tmp_path: Path) -> StreamingDataset:
    weights = [{k: v for k, v in s.items() if k != "name"} for s in case["streams"]]
    streams = [Stream(local=str(ORDER / "datasets" / s["name"]), **w) for s, w in zip(case["streams"], weights)]
    return StreamingDataset(
        streams=streams, batch_size=case["batch_size"], job_root=str(tmp_path), **case["dataset_kwargs"]
    )


def _resumed_epoch(case: dict, tmp_path: Path) -> list[int]:
    ds = _dataset(case, tmp_path)
    ds.load_state_dict(
        {**ds.state_dict(0, from_beginning=True), "epoch": case["epoch"], "sample_in_epoch": case["sample_in_epoch"]}
    )
    return ids(ds)


@pytest.mark.parametrize(
    "case", SINGLE, ids=lambda c: f"{c['dataset_kwargs']['batching_method']}-{c['dataset_kwargs']['shuffle_algo']}"
)
def test_single_device_order_matches_the_reference(case: dict, tmp_path: Path) -> None:
    if "error" in case:
        with pytest.raises(ConfigurationError):
            _resumed_epoch(case, tmp_path)
        return
    assert _resumed_epoch(case, tmp_path) == [i for i in case["ids"] if i >= 0]


def test_every_order_setting_reaches_the_order_spec(tmp_path: Path) -> None:
    settings = {"epoch_size": 50, "shuffle": True, "shuffle_algo": "py1s", "shuffle_seed": 7, "batch_size": 3}
    settings |= {"num_canonical_nodes": 2, "shuffle_block_size": 1000, "sampling_method": "fixed", "replication": 1}
    settings |= {"sampling_granularity": 2, "partition_algo": "orig", "batching_method": "stratified"}
    from_elsewhere = {"shard_sizes", "weights", "initial_physical_nodes", "weights_seed"}  # streams, resume state
    assert set(settings) == {field.name for field in dataclasses.fields(OrderSpec)} - from_elsewhere
    ds = three_streams(tmp_path, **settings)
    assert {name: getattr(ds.order_spec, name) for name in settings} == settings


def test_sizes_and_random_access(tmp_path: Path) -> None:
    ds = three_streams(tmp_path)
    assert ds.num_samples == ds.size == ds.epoch_size == 420 and len(ds) == 420
    assert int(ds[0]["id"]) == 0 and int(ds[-1]["id"]) == 419 and ids(ds[5:8]) == [5, 6, 7]


def test_every_iteration_is_the_next_epoch_and_shuffles_differ(tmp_path: Path) -> None:
    ds = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1)
    assert ds.next_epoch == 0 and len(ds.shards) == 9
    first, second = ids(ds), ids(ds)
    assert ds.next_epoch == 2
    assert sorted(first) == sorted(second) == list(range(420)) and first != second
    again = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1)
    assert ids(again) == first  # deterministic across objects and processes
    resumed = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1)  # at the very end of epoch 0
    resumed.load_state_dict({**ds.state_dict(0, True), "epoch": 0, "sample_in_epoch": 420})
    assert ids(resumed) == []
    assert ids(resumed) == second  # then the next epoch


# Spawned workers take half a minute (each imports torch): the slow tier (make test-all, CI) runs them.
SPAWNED = [pytest.param(workers, "spawn", marks=pytest.mark.slow) for workers in (1, 3)]


@pytest.mark.parametrize(("num_workers", "context"), [(0, None), (1, "fork"), (3, "fork"), *SPAWNED])
def test_loader_resumes_mid_epoch_exactly(tmp_path: Path, num_workers: int, context: str | None) -> None:
    kwargs = {"shuffle": True, "num_canonical_nodes": 2, "batch_size": 4}
    loader_kwargs: dict[str, Any] = {"batch_size": 4, "num_workers": num_workers, "multiprocessing_context": context}
    full = batch_ids(StreamingDataLoader(three_streams(tmp_path, **kwargs), **loader_kwargs))
    loader = StreamingDataLoader(three_streams(tmp_path, **kwargs), **loader_kwargs)
    seen = first_batches(loader, 7)
    state = loader.state_dict()
    assert state is not None and state["epoch"] == 0 and state["sample_in_epoch"] == 28
    resumed = StreamingDataLoader(three_streams(tmp_path, **kwargs), **loader_kwargs)
    resumed.load_state_dict(state)
    assert seen + batch_ids(resumed) == full
    assert batch_ids(resumed) != full  # the same loader object: the next iteration is the next epoch


def test_a_loaded_state_applies_even_after_iterating(tmp_path: Path) -> None:
    """The reference ignores a state loaded into a dataset that already iterated (issue #437)."""
    ds = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1)
    epoch0 = ids(ds)
    state = ds.state_dict(100, from_beginning=True)
    assert state["epoch"] == 0
    ds.load_state_dict(state)
    assert ids(ds) == epoch0[100:]


def test_resuming_on_other_data_is_refused(tmp_path: Path) -> None:
    state = three_streams(tmp_path).state_dict(10, from_beginning=True)
    other = StreamingDataset(local=S0, batch_size=4, job_root=str(tmp_path))
    with pytest.raises(ResumeError, match="different data or order settings"):
        other.load_state_dict(state)
    other.load_state_dict({**state, "sample_in_epoch": 0}, allow_other_data=True)
    with pytest.raises(ResumeError, match="lacks"):
        other.load_state_dict({"epoch": 0})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"streams": [], "local": "x"}, "not both"),
        ({}, "pass streams"),
        ({"local": S0, "stream_name": "foo"}, "stream_name=.foo. is not registered"),
        ({"local": S0, "shuffle_algo": "py1b"}, "shuffle_algo"),
        ({"local": S0, "remote": "ftp://bucket/x"}, "unsupported URL scheme 'ftp'"),
        ({"local": S0, "cache_limit": "lots"}, "cache_limit: Unsupported value/suffix 'lots'"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(MDSError, match=message):
        StreamingDataset(job_root=str(tmp_path), **kwargs)


def test_batch_size_is_needed_to_iterate(tmp_path: Path) -> None:
    ds = StreamingDataset(local=S0, job_root=str(tmp_path))
    with pytest.raises(ConfigurationError, match="batch_size"):
        next(iter(ds))
    assert np.asarray(ds[3]["id"]) == 3


RESUME = json.loads((ORDER / "resume.json").read_text())["cases"]


@pytest.mark.parametrize(
    "case", RESUME, ids=lambda c: f"{c['dataset_kwargs'].get('shuffle_algo', 'noshuffle')}-w{c['num_workers']}"
)
def test_a_reference_state_dict_continues_the_reference_order(case: dict, tmp_path: Path) -> None:
    def loader() -> StreamingDataLoader:
        return StreamingDataLoader(
            _dataset(case, tmp_path), batch_size=case["batch_size"], num_workers=case["num_workers"]
        )

    fresh = loader()
    assert batch_ids(fresh) == case["epoch0_batches"]
    resumed = loader()
    resumed.load_state_dict(case["state_dict"])
    assert batch_ids(resumed) == case["epoch0_batches"][case["resume_after_batches"] :]
    assert batch_ids(resumed)[: len(case["epoch1_first_batches"])] == case["epoch1_first_batches"]


def test_persistent_workers_advance_epochs_like_fresh_ones(tmp_path: Path) -> None:
    kwargs = {"shuffle": True, "num_canonical_nodes": 2}
    fresh = StreamingDataLoader(three_streams(tmp_path, **kwargs), batch_size=4, num_workers=2)
    persistent = StreamingDataLoader(
        three_streams(tmp_path, **kwargs), batch_size=4, num_workers=2, persistent_workers=True
    )
    for _ in range(2):
        assert batch_ids(persistent) == batch_ids(fresh)


def test_two_datasets_in_one_process_do_not_interfere(tmp_path: Path) -> None:
    a = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1)
    b = three_streams(tmp_path, shuffle=True, num_canonical_nodes=1, shuffle_seed=1)
    expected_a = ids(three_streams(tmp_path / "x", shuffle=True, num_canonical_nodes=1))
    pairs = list(zip(a, b))
    assert [int(x["id"]) for x, _ in pairs] == expected_a
    assert [int(y["id"]) for _, y in pairs] != expected_a


_ITERATE = """
import os, sys
from pathlib import Path
from mds_core import Stream, StreamingDataset
data = Path(sys.argv[1])
ds = StreamingDataset(streams=[Stream(local=str(data / n)) for n in ("s0", "s1", "s2")], batch_size=4,
                      shuffle=True, num_canonical_nodes=1, job_root=sys.argv[2])
for i, sample in enumerate(ds):
    if i == 50 and sys.argv[3] == "kill":
        print(ds._job.path, flush=True)
        os.kill(os.getpid(), 9)
print(ds._job.path, i + 1, flush=True)
"""


def test_a_killed_run_leaves_nothing_that_breaks_the_next(tmp_path: Path) -> None:
    killed = run_python(_ITERATE, str(ORDER / "datasets"), str(tmp_path), "kill", timeout=120)
    assert killed.returncode == -9
    stale = Path(killed.stdout.split()[0])
    assert stale.exists()  # SIGKILL: no clean-up ran
    command = [sys.executable, "-c", _ITERATE, str(ORDER / "datasets"), str(tmp_path), "full"]
    both = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]  # two jobs on one host
    outputs = [proc.communicate(timeout=120)[0].split() for proc in both]
    assert all(proc.returncode == 0 for proc in both) and [o[1] for o in outputs] == ["420", "420"]
    assert outputs[0][0] != outputs[1][0]  # separate job directories
    assert not stale.exists() and not any(Path(o[0]).exists() for o in outputs)


def test_streams_with_zero_sample_shards(tmp_path: Path) -> None:
    golden = FIXTURES / "mds-golden" / "datasets" / "zero_sample_shard"
    ds = StreamingDataset(local=str(golden), batch_size=2, job_root=str(tmp_path))
    expected = [ds.get_item(i)["b"] for i in range(7)]
    assert [s["b"] for s in ds] == expected and len(set(expected)) > 1


_LAZY_TORCH = """
import sys
from mds_core import StreamingDataset
ds = StreamingDataset(local=sys.argv[1], batch_size=2, job_root=sys.argv[2])
first = next(iter(ds))
assert "torch" not in sys.modules, "constructing and iterating must not import torch"
import torch
from torch.utils.data import DataLoader, IterableDataset
again = StreamingDataset(local=sys.argv[1], batch_size=2, job_root=sys.argv[2])
assert isinstance(again, IterableDataset)
plain = [int(i) for batch in DataLoader(again, batch_size=2) for i in batch["id"]]
assert plain == [int(s["id"]) for s in StreamingDataset(local=sys.argv[1], batch_size=2, job_root=sys.argv[2])]
print("ok", len(plain))
"""


def test_torch_is_imported_only_when_the_caller_uses_it(tmp_path: Path) -> None:
    done = run_python(_LAZY_TORCH, S0, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", str(len(StreamingDataset(local=S0)))]


@given(count=st.integers(0, 20_000), per_call=st.sampled_from([256, 1000, 4096]))
def test_decode_blocks_cover_every_sample_once_the_first_small(count: int, per_call: int) -> None:
    bounds = block_bounds(count, per_call)
    assert [i for begin, end in bounds for i in range(begin, end)] == list(range(count))
    assert all(end - begin <= per_call for begin, end in bounds[1:])
    assert not bounds or bounds[0][1] - bounds[0][0] == min(count, 256)


def test_small_samples_decode_many_at_a_time_large_ones_256() -> None:
    assert decode_block_size(100 * 20_000, 20_000) == 4096  # 100-byte samples
    assert decode_block_size(2048 * 1000, 1000) == 512
    assert decode_block_size(9_000 * 20_000, 20_000) == 256  # the mixed workload's ~9 KB
    assert decode_block_size(0, 0) == 4096


def test_a_shuffled_epoch_of_small_samples_equals_reading_each_sample(tmp_path: Path) -> None:
    """Decoded 256 then 4,096 at a time (the samples are 8 bytes), each sample arrives once, as its own value."""
    data = write_ids(tmp_path / "d", 10_000, size_limit=1 << 14)
    dataset = StreamingDataset(local=str(data), batch_size=8, shuffle=True, job_root=str(tmp_path / "j"))
    assert dataset._decode_block == 4096
    samples = ids(dataset)
    assert sorted(samples) == list(range(10_000)) and samples != sorted(samples)
