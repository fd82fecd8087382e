"""A worker's part of the epoch is a view of the node's shared order (stored as int32 where ids fit), not a
private copy: at 10⁸ samples the copies were 0.8 GiB of a node's memory (benchmarks/bench_scale.py)."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from mds_core import StreamingDataset
from mds_core.streaming import epochs
from mds_core.streaming.epochs import _without_padding
from mds_core.streaming.staged import StagedRow
from tests.streaming.support import memory_owner, write_rows

NUM_SAMPLES = 103  # not a multiple of the batch: the order is padded


def test_trailing_padding_is_cut_by_a_view() -> None:
    work = np.arange(12, dtype=np.int32).reshape(3, 4)
    work[2, 2:] = -1
    row = _without_padding(work)
    assert row.tolist() == list(range(10))
    assert np.shares_memory(row, work)


def test_padding_inside_a_row_is_dropped_by_a_copy() -> None:
    work = np.array([[0, -1], [2, 3]])
    row = _without_padding(work)
    assert row.tolist() == [0, 2, 3]
    assert not np.shares_memory(row, work)


def test_the_node_order_is_int32_and_a_worker_reads_a_view_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(epochs, "HEAD_MIN_SAMPLES", 0)  # first batches first, as for a long epoch
    root = write_rows(tmp_path / "data", {"id": "int"}, ({"id": i} for i in range(NUM_SAMPLES)), size_limit="1kb")
    dataset = StreamingDataset(local=str(root), shuffle=True, batch_size=4, job_root=str(tmp_path / "jobs"))
    assert sorted(sample["id"] for sample in dataset) == list(range(NUM_SAMPLES))
    stored = sorted((tmp_path / "jobs").rglob("work-e0-*.npy"), key=lambda path: path.name)
    assert [path.name.endswith("-head.npy") for path in stored] == [True, False]  # the first batches, the whole order
    assert [np.load(path, mmap_mode="r").dtype for path in stored] == [np.int32, np.int32]
    row = dataset._epochs.row(dataset.world, 0, 0, None)
    assert isinstance(row, StagedRow)  # an unscheduled epoch, long enough for its first batches to come first
    whole = row.whole()
    assert sorted(whole.tolist()) == list(range(NUM_SAMPLES))
    assert row[0:10].tolist() == whole[:10].tolist()
    assert isinstance(memory_owner(whole), mmap.mmap)  # the shared file's map, not a copy


def test_only_the_process_that_computes_the_order_checks_it_against_the_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check reads every shard's index entry. A DataLoader worker that reads them copies the pages they lie on
    # from the rank it forked from (2.7 MiB a worker at 10**4 shards), so a worker that finds the order computed
    # must not check it, and the entries are read only to name the largest claim in a refusal.
    monkeypatch.setattr(epochs, "HEAD_MIN_SAMPLES", 0)  # first batches first, as for a long epoch
    checks: list[tuple[int, int]] = []
    monkeypatch.setattr(
        "mds_core.streaming.local.check_order_fits",
        lambda samples, epoch, largest: checks.append((samples, epoch)),  # accepts without naming the largest
    )
    root = write_rows(tmp_path / "data", {"id": "int"}, ({"id": i} for i in range(NUM_SAMPLES)), size_limit="1kb")
    dataset = StreamingDataset(local=str(root), shuffle=True, batch_size=4, job_root=str(tmp_path / "jobs"))
    first = dataset._epochs.row(dataset.world, 0, 0, None)
    assert isinstance(first, StagedRow)
    first.whole()
    again = dataset._epochs.row(dataset.world, 0, 0, None)  # as the rank's second worker finds it
    assert isinstance(again, StagedRow)
    assert first.whole().tolist() == again.whole().tolist()
    assert checks == [(NUM_SAMPLES, 0)] * 2  # the first batches, then the whole order
