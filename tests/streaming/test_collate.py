"""``collate_samples`` gives exactly ``default_collate``'s batch, for every value an MDS column decodes to."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import default_collate

from mds_core import LocalDataset, StreamingDataLoader, StreamingDataset
from mds_core.streaming.collate import PIPE_BYTES, NumpyBatch, collate_for_transit, collate_samples, finish_batch
from tests.streaming.support import batch_ids, write_rows

INTS = [f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64)]
NUMBER_ENCODINGS = [*INTS, "float16", "float32", "float64"]


def assert_same_batch(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want) or torch.equal(got.isnan(), want.isnan())
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            assert_same_batch(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert_same_batch(a, b)
    else:
        assert got == want


@settings(max_examples=25, deadline=None)
@given(data=st.data(), size=st.integers(1, 9), encoding=st.sampled_from(NUMBER_ENCODINGS))
def test_decoded_samples_collate_as_default_collate(tmp_path_factory, data, size, encoding) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = np.dtype(encoding)
    numbers, fixed, free = (rng.integers(0, 100, shape).astype(dtype) for shape in (size, (size, 2, 3), (size, 4)))
    samples = [
        {"id": i, "number": numbers[i], "text": "é" * i, "blob": bytes([i]) * i, "fixed": fixed[i], "free": free[i]}
        for i in range(size)
    ]
    shaped = f"ndarray:{encoding}:2,3"
    columns = {"id": "int", "number": encoding, "text": "str", "blob": "bytes", "fixed": shaped, "free": "ndarray"}
    ds = LocalDataset(local=str(write_rows(tmp_path_factory.mktemp("ds"), columns, samples)))
    batch = [ds[i] for i in range(size)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # default_collate's "not writable" warning
        try:
            want = default_collate(batch)
        except TypeError as err:  # uint64 scalars: default_collate cannot batch them, nor can we
            with pytest.raises(TypeError, match=str(err)):
                collate_samples(batch)
            return
    assert_same_batch(collate_samples(batch), want)


@pytest.mark.parametrize(
    "batch",
    [
        [{"i": 2**62, "f": 0.1, "b": True}, {"i": -3, "f": 2.0, "b": False}],
        [(1, 2.0), (3, 4.0)],
        [{"a": 1}, {"a": 2.5}],
    ],
    ids=["python-numbers", "tuples", "mixed-types"],
)
def test_python_values_collate_as_default_collate(batch: list) -> None:
    assert_same_batch(collate_samples(batch), default_collate(batch))


@pytest.mark.parametrize(
    "batch",
    [
        [{"i": 2**64}, {"i": 1}],
        [{"a": np.zeros(2)}, {"a": np.zeros(3)}],
        [{"a": np.array(["x"])}, {"a": np.array(["y"])}],
    ],
    ids=["overflow", "ragged", "strings"],
)
def test_what_default_collate_refuses_is_refused_with_its_error(batch: list) -> None:
    with pytest.raises(Exception) as theirs:
        default_collate(batch)
    with pytest.raises(theirs.type) as ours:
        collate_samples(batch)
    assert str(ours.value) == str(theirs.value)


def test_batches_in_transit_carry_small_columns_as_numpy_and_finish_as_tensors() -> None:
    batch = [{"small": np.arange(4, dtype=np.int16), "large": np.zeros(PIPE_BYTES // 8, np.float32), "t": "x"}] * 2
    assert collate_for_transit(batch).keys() == {"small", "large", "t"}  # not in a worker: tensors
    assert type(collate_for_transit(batch)) is dict
    in_transit = NumpyBatch(small=np.arange(8, dtype=np.int16).reshape(2, 4), large=torch.zeros(2, 3), t=["x", "x"])
    finished = finish_batch(in_transit)
    assert type(finished) is dict and list(finished) == ["small", "large", "t"]
    assert finished["small"].dtype == torch.int16 and finished["small"].shape == (2, 4)
    assert finished["large"] is in_transit["large"] and finished["t"] == ["x", "x"]
    assert finish_batch({"a": 1}) == {"a": 1}


def test_loader_batches_own_their_memory_and_match_default_collate(tmp_path: Path) -> None:
    samples = [{"id": i, "emb": np.full(4, i, np.float32), "text": str(i)} for i in range(40)]
    write_rows(tmp_path, {"id": "int", "emb": "ndarray:float32:4", "text": "str"}, samples)
    ds = StreamingDataset(local=str(tmp_path), batch_size=8, job_root=str(tmp_path / "jobs"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "array is not writable" warning any more
        batches = list(StreamingDataLoader(ds, batch_size=8))
    assert batch_ids(batches) == [list(range(i, i + 8)) for i in range(0, 40, 8)]
    assert torch.equal(batches[1]["emb"], torch.tensor([[i] * 4 for i in range(8, 16)], dtype=torch.float32))
    assert batches[0]["text"] == [str(i) for i in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        through_workers = list(StreamingDataLoader(ds, batch_size=8, num_workers=2))
    assert all(type(b) is dict for b in through_workers)
    for got, want in zip(through_workers, batches):
        assert_same_batch(got, want)
    custom = StreamingDataLoader(ds, batch_size=8, collate_fn=lambda b: {"n": [len(b)]})
    assert list(custom) == [{"n": [8]}] * 5
