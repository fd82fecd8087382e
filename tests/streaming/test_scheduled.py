"""A scheduled ``StreamingDataset`` end to end: through ``StreamingDataLoader`` with workers, stopped and resumed
with the schedule amended, and in real rank processes over gloo whose world changes at the resume (2 → 1,
1 → 2). The batches must be those of ``mds_core.order.schedule`` for the schedule in force at each step."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mds_core import Phase, Schedule, Stream, StreamingDataLoader, StreamingDataset
from mds_core.errors import ResumeError
from mds_core.order.schedule import Position, ScheduledOrder
from tests.streaming.support import ORDER, batch_ids, first_batches, global_batches, rank_config, run_ranks

DATASETS = ORDER / "datasets"
SIZES = {"s0": 109, "s1": 61, "s2": 250}  # ids 0..419 in this order (the "id" column is the global id)
SHARDS = {"s0": [28, 7, 71, 3], "s1": [61], "s2": [50, 50, 13, 137]}
FIRST = Schedule([Phase(0, {"s0": 0.5, "s1": 0.5}), Phase(6, {"s0": 0.2, "s1": 0.2, "s2": 0.6})])
AMENDED = Schedule([Phase(0, {"s0": 0.5, "s1": 0.5}), Phase(6, {"s0": 0.7, "s2": 0.3})])  # from the resume on


def _dataset(schedule: Schedule, tmp: Path, names=("s0", "s1", "s2"), **kwargs) -> StreamingDataset:
    streams = [Stream(local=str(DATASETS / name), name=name) for name in names]
    return StreamingDataset(
        streams=streams, batch_size=8, schedule=schedule, shuffle=True, job_root=str(tmp / "jobs"), **kwargs
    )


def _expected(segments: list[tuple[Schedule, int]], names=("s0", "s1", "s2"), batch: int = 8) -> list[list[int]]:
    """The global batches (of ``batch``) ``mds_core.order.schedule`` gives when each schedule rules ``steps`` steps."""
    batches: list[list[int]] = []
    position, shards = Position(0, {}), [SHARDS[n] for n in names]
    for schedule, steps in segments:
        order = ScheduledOrder(schedule, list(names), shards, batch, shuffle=True, shuffle_seed=9176)
        end = position.step + steps
        batches += [ids.tolist() for _, ids in order.global_batches(position, end)]
        position = order.advance(position, end)
    return batches


def test_a_loader_with_workers_resumes_with_an_amended_schedule(tmp_path: Path) -> None:
    dataset = _dataset(FIRST, tmp_path / "a")
    loader = StreamingDataLoader(dataset, batch_size=8, num_workers=2)
    whole = batch_ids(loader)
    assert len(whole) == 420 // 8 and whole == _expected([(FIRST, 52)])

    stopped = StreamingDataLoader(_dataset(FIRST, tmp_path / "b"), batch_size=8, num_workers=2)
    first = first_batches(stopped, 9)
    state = stopped.state_dict()
    assert state is not None
    assert first == whole[:9] and state["schedule"]["step"] == 9
    stream_of = np.searchsorted([109, 170], sum(first, []), side="right")  # ids from 109: s1, from 170: s2
    assert state["schedule"]["given"] == dict(zip(SIZES, np.bincount(stream_of, minlength=3).tolist()))

    resumed = StreamingDataLoader(_dataset(AMENDED, tmp_path / "c", epoch_size=400), batch_size=8, num_workers=3)
    resumed.load_state_dict(state)
    rest = batch_ids(resumed)
    assert rest == _expected([(FIRST, 9), (AMENDED, 50 - 9)])[9:]  # 400 samples: 50 steps an epoch
    assert all(not any(109 <= i < 170 for i in batch) for batch in rest)  # s1 left at the amendment
    assert all(Counter(i < 109 for i in batch)[True] in (5, 6) for batch in rest)  # 0.7 of 8 = 5.6


def test_a_stream_dropped_at_the_resume_is_left_out_and_the_others_continue(tmp_path: Path) -> None:
    state = _dataset(FIRST, tmp_path / "a").state_dict(16, from_beginning=True)
    without_s1 = Schedule([Phase(0, {"s0": 1, "s2": 1})])
    dataset = _dataset(without_s1, tmp_path / "b", names=("s0", "s2"))
    dataset.load_state_dict(state)
    ids = [sample["id"] for sample in dataset]
    expected = _expected([(FIRST, 2)])
    order = ScheduledOrder(without_s1, ["s0", "s2"], [SHARDS["s0"], SHARDS["s2"]], 8, shuffle=True, shuffle_seed=9176)
    given = {"s0": sum(i < 109 for b in expected for i in b), "s2": 0}
    rest = [ids.tolist() for _, ids in order.global_batches(Position(2, given), 2 + len(ids) // 8)]
    # The order counts samples in the two-stream dataset, where s2's first is 109; its "id" column says 170.
    assert ids == [i if i < 109 else i + 61 for batch in rest for i in batch]
    s0_before = [i for batch in expected for i in batch if i < 109]
    s0_after = [i for i in ids if i < 109][: 109 - len(s0_before)]
    assert sorted(s0_before + s0_after) == list(range(109))  # s0's pass went on where it was


def test_a_scheduled_state_on_an_unscheduled_dataset_and_back_is_refused(tmp_path: Path) -> None:
    state = _dataset(FIRST, tmp_path / "a").state_dict(0, from_beginning=True)
    plain = StreamingDataset(local=str(DATASETS / "s0"), batch_size=8, job_root=str(tmp_path / "jobs"))
    with pytest.raises(ResumeError, match=r"different data or order settings"):
        plain.load_state_dict(state)
    with pytest.raises(ResumeError, match=r"this dataset is scheduled, and the state dict has no 'schedule' entry"):
        _dataset(FIRST, tmp_path / "b").load_state_dict(plain.state_dict(0, from_beginning=True))


@pytest.mark.slow  # 5 runs of real rank processes: the in-process worlds of tests/order/test_schedule.py say it fast
@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2)])
def test_real_ranks_resume_on_another_world_with_the_same_global_batches(
    tmp_path: Path, before: int, after: int
) -> None:
    def config(where: str, ranks: int, **extra) -> dict:
        kwargs = {"shuffle": True, "schedule": FIRST.to_json()}
        return rank_config(tmp_path / where, 16 // ranks, 2, dataset_kwargs=kwargs, **extra)

    whole = global_batches(run_ranks(tmp_path / "whole", before, before, config("whole", before)))
    expected = _expected([(FIRST, 420 // 16)], batch=16)
    assert whole == expected
    first = run_ranks(tmp_path / "first", before, before, config("first", before, stop_after=7))
    state = json.loads(json.dumps(first[0]["state"]))
    rest = global_batches(run_ranks(tmp_path / "rest", after, after, config("rest", after, state=state)))
    assert global_batches(first) + rest == expected
