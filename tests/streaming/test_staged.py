"""An epoch's first batches come before the rest of its order is made, and nothing changes in what is read."""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mds_core.order
from mds_core import StreamingDataset
from mds_core.errors import EpochMemoryError
from mds_core.streaming import epochs
from mds_core.streaming.staged import BACKGROUND_NICENESS, StagedRow, ready, slices
from tests.streaming.support import write_rows

NUM_SAMPLES = 3000


def test_a_staged_row_reads_its_head_then_waits_for_the_whole_row() -> None:
    release = threading.Event()

    def whole() -> np.ndarray:
        release.wait()
        return np.arange(10, 30)

    row = StagedRow(np.arange(10, 16), whole)
    assert ready(row)() == 6
    assert row[0:4].tolist() == [10, 11, 12, 13]
    assert row[4:9].tolist() == [14, 15]  # ends at the head's end rather than wait
    release.set()
    assert row.whole()[:3].tolist() == [10, 11, 12]
    assert [ids.tolist()[:2] for _, ids in slices(row, 8)] == [[10, 11], [18, 19], [26, 27]]
    assert len(row) == ready(row)() == 20


def test_an_error_making_the_whole_row_is_raised_where_the_row_is_read() -> None:
    def whole() -> np.ndarray:
        raise EpochMemoryError("epoch 0: the order does not fit")

    row = StagedRow(np.arange(4), whole)
    with pytest.raises(EpochMemoryError, match="does not fit"):
        list(slices(row, 3))


def test_the_first_samples_come_while_the_rest_of_the_order_is_being_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(epochs, "HEAD_MIN_SAMPLES", 0)  # an epoch this small is ordered whole, at once
    root = write_rows(tmp_path / "data", {"id": "int"}, ({"id": i} for i in range(NUM_SAMPLES)), size_limit="4kb")

    def dataset(job_root: Path) -> StreamingDataset:
        return StreamingDataset(local=str(root), shuffle=True, shuffle_seed=3, batch_size=8, job_root=str(job_root))

    expected = [sample["id"] for sample in dataset(tmp_path / "a")]
    release, made = threading.Event(), []
    generate_work = mds_core.order.generate_work

    def slow_generate_work(*args: Any) -> np.ndarray:
        assert release.wait(timeout=60)
        made.append(True)
        return generate_work(*args)

    monkeypatch.setattr(epochs, "generate_work", slow_generate_work)
    samples = iter(dataset(tmp_path / "b"))
    first = [next(samples)["id"] for _ in range(epochs.HEAD_ROUNDS * 8)]  # the head: every batch of the first rounds
    assert not made
    release.set()
    assert first + [sample["id"] for sample in samples] == expected
    assert made == [True]
    assert sorted(expected) == list(range(NUM_SAMPLES))


def test_the_rest_of_the_order_is_made_behind_the_first_batches_at_a_lower_priority() -> None:
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def whole() -> np.ndarray:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return np.arange(8)

    assert StagedRow(np.arange(2), whole).whole().tolist() == list(range(8))
    assert seen == [min(19, own + BACKGROUND_NICENESS)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # the iterating thread keeps its own


def test_a_small_shuffle_block_is_warned_of_once_for_the_head_and_the_whole_order(tmp_path: Path) -> None:
    root = write_rows(tmp_path / "data", {"id": "int"}, ({"id": i} for i in range(NUM_SAMPLES)), size_limit="4kb")
    dataset = StreamingDataset(
        local=str(root), shuffle=True, shuffle_block_size=10, batch_size=8, job_root=str(tmp_path / "jobs")
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own: a warning once per place it is raised from
        assert len(list(dataset)) == NUM_SAMPLES  # the head's order first, then the whole order's
    assert [str(w.message)[:41] for w in caught] == ["Shuffle block size was smaller than shard"]


def test_a_small_epoch_is_ordered_whole_at_once(tmp_path: Path) -> None:
    # Its whole order costs about what its first batches would: no second order, file or thread.
    root = write_rows(tmp_path / "data", {"id": "int"}, ({"id": i} for i in range(NUM_SAMPLES)), size_limit="4kb")
    dataset = StreamingDataset(local=str(root), shuffle=True, batch_size=8, job_root=str(tmp_path / "jobs"))
    assert NUM_SAMPLES < epochs.HEAD_MIN_SAMPLES
    row = dataset._epochs.row(dataset.world, 0, 0, None)
    assert isinstance(row, np.ndarray)
    assert [path.name.endswith("-head.npy") for path in (tmp_path / "jobs").rglob("work-e0-*.npy")] == [False]
    assert sorted(row.tolist()) == list(range(NUM_SAMPLES))
