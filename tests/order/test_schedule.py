"""Mixing schedules (mds_core.order.schedule, mds_core.streaming.scheduled): each global batch's composition
within one sample of its phase's quota, every stream drawn without replacement pass by pass, the same
global batches on every world and worker count, and resumes (with the schedule amended, streams added
or dropped, the world changed) that lose and repeat nothing. Worlds are simulated here in one process,
each (rank, worker) reading its row and the ranks' DataLoaders interleaving their workers' batches;
real processes are in tests/streaming/test_scheduled.py."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.errors import ConfigurationError, ResumeError
from mds_core.order.schedule import Phase, PhaseMix, Position, Schedule, ScheduledOrder, _floor_sum
from mds_core.order.spec import OrderSpec
from mds_core.order.traversal import to_global_batches
from mds_core.order.world import World
from mds_core.streaming.scheduled import ScheduledEpochs
from mds_core.streaming.stream import Stream

# Three small streams of uneven shards, so that passes wrap many times in a run.
SHARDS = {"web": [20, 17, 23], "code": [11, 9], "math": [7, 6, 8]}
NAMES = list(SHARDS)
SIZES = {name: sum(sizes) for name, sizes in SHARDS.items()}
OFFSETS = dict(zip(NAMES, np.cumsum([0, *SIZES.values()])[:-1].tolist()))
GLOBAL_BATCH = 24  # 8, 4, 6, 3, 2 and 1 ranks all divide it
EPOCH = 5 * GLOBAL_BATCH


def test_floor_sum_is_the_sum_of_floors() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        n, m, a, b = rng.randint(0, 60), rng.randint(1, 50), rng.randint(0, 120), rng.randint(-300, 300)
        assert _floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n)), (n, m, a, b)


@given(
    weights=st.lists(st.sampled_from([0, 0.05, 0.1, 0.25, 1 / 3, 0.5, 0.7, 1, 2, 3.5]), min_size=1, max_size=5),
    batch=st.integers(1, 97),
    steps=st.integers(1, 120),
)
def test_each_step_is_within_one_sample_of_its_quota_and_the_closed_form_counts_them(
    weights: list[float], batch: int, steps: int
) -> None:
    if not any(weights):
        return
    mix = PhaseMix(weights, batch)
    exact = [Fraction(str(w)) for w in weights]
    quotas = [batch * w / sum(exact) for w in exact]
    given = [0] * len(weights)
    for j in range(steps):
        assert mix.given_through(j) == given
        counts = mix.counts(j)
        assert sum(counts) == batch
        assert all(math.floor(q) <= c <= math.ceil(q) for c, q in zip(counts, quotas)), (counts, quotas)
        given = [g + c for g, c in zip(given, counts)]
    if steps >= mix.total:  # over every A steps, exactly each stream's share
        assert mix.given_through(mix.total) == [batch * length for length in mix.lengths]


def test_resuming_far_into_a_run_costs_what_resuming_near_its_start_does() -> None:
    order = ScheduledOrder(
        Schedule([Phase(0, {"web": 0.6, "code": 0.4}), Phase(10**5, {"web": 0.3, "code": 0.3, "math": 0.4})]),
        NAMES,
        list(SHARDS.values()),
        2048,
    )
    far = order.advance(Position(0, {}), 10**6)
    assert sum(far.given.values()) == 2048 * 10**6
    assert far.given["math"] == round(2048 * 0.4 * (10**6 - 10**5))
    started = time.perf_counter()
    for _ in range(200):
        order.advance(Position(0, {}), 10**6)
    assert time.perf_counter() - started < 1.0  # closed form: no walk over the steps (a walk takes seconds)


# simulated worlds


def _streams(names: list[str], tmp: Path) -> list[Stream]:
    for name in names:  # a state dict records a hash of each stream's index.json
        (tmp / name).mkdir(exist_ok=True)
        (tmp / name / "index.json").write_text(name)
    return [Stream(local=str(tmp / name), name=name) for name in names]


def _epochs(schedule: Schedule, names: list[str], ranks: int, rank: int, tmp: Path) -> ScheduledEpochs:
    spec = OrderSpec(shard_sizes=[SHARDS[n] for n in names], weights=[None] * len(names), shuffle=True, shuffle_seed=5)
    world = World(num_nodes=1, ranks_per_node=ranks, rank=rank)
    return ScheduledEpochs.of_streams(schedule, _streams(names, tmp), spec, world, GLOBAL_BATCH // ranks, EPOCH)


def _run(segments: list[tuple[Schedule, list[str], int, int, int]], tmp: Path) -> list[list[int]]:
    """Global batches of a run in segments ``(schedule, streams, ranks, workers, steps)``: each segment
    resumes from the state the previous one took, on its own world (global ids: ``OFFSETS``). Every
    (rank, worker) row comes from ``ScheduledEpochs.row``, and the DataLoaders' traversal interleaves them."""
    state: dict | None = None
    batches: list[list[int]] = []
    for schedule, names, ranks, workers, steps in segments:
        epochs = _epochs(schedule, names, ranks, 0, tmp)
        roots = [str(tmp / n) for n in names]
        resumed = epochs.resume(state, roots, True) if state else {"epoch": 0, "sample_in_epoch": 0}
        epoch, sample, base = resumed["epoch"], resumed["sample_in_epoch"], resumed if state else None
        canonical = np.concatenate([OFFSETS[n] + np.arange(SIZES[n]) for n in names])  # ids whatever streams are in
        taken = 0
        while taken < steps:
            work = epochs.work(World(1, ranks, 0, workers), epoch, sample, base)
            rows = [row for row in to_global_batches(work, GLOBAL_BATCH) if row[0] >= 0]  # -1: a worker's batch fewer
            count = min(steps - taken, len(rows))
            batches += [canonical[row].tolist() for row in rows[:count]]
            taken += count
            epoch, sample = (epoch + 1, 0) if count == len(rows) else (epoch, sample + count * GLOBAL_BATCH)
        state = {"schedule": epochs.state(epoch, sample, base, roots)}
    return batches


def _stream_of(sample: int) -> str:
    return next(n for n in reversed(NAMES) if sample >= OFFSETS[n])


def _check_drawn_without_replacement(batches: list[list[int]]) -> None:
    """After every batch, per stream: with ``n`` drawn of ``N``, every sample drawn ``n // N`` times and
    ``n % N`` of them once more (whole passes hold each sample once; the pass under way, none twice)."""
    drawn: dict[str, Counter[int]] = {n: Counter() for n in NAMES}
    for batch in batches:
        for sample in batch:
            drawn[_stream_of(sample)][sample] += 1
        for name, counts in drawn.items():
            whole, extra = divmod(sum(counts.values()), SIZES[name])
            times = Counter(counts.get(i, 0) for i in range(OFFSETS[name], OFFSETS[name] + SIZES[name]))
            assert times == Counter({whole + 1: extra, whole: SIZES[name] - extra}) - Counter(), (name, times)


def _check_shares(batches: list[list[int]], segments: list) -> None:
    step = 0
    for schedule, _, _, _, steps in segments:
        for _ in range(steps):
            weights = next(p for p in reversed(schedule.phases) if p.start <= step).weights
            exact = {n: Fraction(str(float(w))) for n, w in weights.items()}
            counts = Counter(_stream_of(s) for s in batches[step])
            for name in NAMES:
                quota = GLOBAL_BATCH * exact.get(name, 0) / sum(exact.values())
                assert math.floor(quota) <= counts[name] <= math.ceil(quota), (step, name, counts, quota)
            step += 1


BASE = Schedule([Phase(0, {"web": 0.6, "code": 0.4}), Phase(7, {"web": 0.5, "code": 0.25, "math": 0.25})])
AMENDED = {
    "weights changed": Schedule([Phase(0, {"web": 0.6, "code": 0.4}), Phase(9, {"web": 0.1, "code": 0.9})]),
    "stream added": Schedule([Phase(0, {"web": 0.6, "code": 0.4}), Phase(12, {"web": 1, "code": 1, "math": 2})]),
    "stream removed": Schedule([Phase(0, {"web": 0.75, "code": 0.25})]),
}


@settings(max_examples=15, deadline=None)
@given(
    amended=st.sampled_from([*sorted(AMENDED), "stream removed, then back"]),
    worlds=st.lists(st.tuples(st.sampled_from([8, 4, 6]), st.integers(1, 4)), min_size=3, max_size=3),
    steps=st.lists(st.integers(1, 9), min_size=3, max_size=3),
)
def test_amended_schedules_on_changing_worlds_lose_and_repeat_nothing(
    amended: str, worlds: list[tuple[int, int]], steps: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.getbasetemp()
    later = AMENDED[amended.removesuffix(", then back")]
    kept = [n for n in NAMES if n in later.stream_names]
    schedules = [(BASE, NAMES), (later, kept), (BASE, NAMES) if amended.endswith("back") else (later, kept)]
    segments = [(s, names, ranks, workers, k) for (s, names), (ranks, workers), k in zip(schedules, worlds, steps)]
    batches = _run(segments, tmp)
    assert len(batches) == sum(steps) and all(len(b) == GLOBAL_BATCH for b in batches)
    _check_drawn_without_replacement(batches)
    _check_shares(batches, segments)
    # The same run on one rank with one worker, stopped at the same steps: the same global batches.
    assert _run([(s, n, 1, 1, k) for s, n, _, _, k in segments], tmp) == batches


def test_a_run_without_stops_is_the_run_with_stops(tmp_path: Path) -> None:
    whole = _run([(BASE, NAMES, 4, 3, 17)], tmp_path)
    stopped = _run([(BASE, NAMES, 8, 2, 5), (BASE, NAMES, 4, 1, 7), (BASE, NAMES, 6, 4, 5)], tmp_path)  # 8 → 4 → 6
    assert stopped == whole
    assert len({tuple(b) for b in whole}) == len(whole)


def test_a_stream_dropped_at_a_resume_continues_where_it_was_when_it_comes_back(tmp_path: Path) -> None:
    removed = AMENDED["stream removed"]
    segments = [(BASE, NAMES, 2, 1, 9), (removed, ["web", "code"], 4, 2, 3), (BASE, NAMES, 8, 3, 6)]
    batches = _run(segments, tmp_path)
    assert sum(_stream_of(s) == "math" for s in sum(batches[:9], [])) == 12  # 2 steps of 6 before the drop
    _check_drawn_without_replacement(batches)  # math's pass goes on after it: no sample twice
    _check_shares(batches, segments)


def test_settings_a_schedule_refuses(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"first phase must start at 0"):
        Schedule([Phase(3, {"web": 1})])
    with pytest.raises(ConfigurationError, match=r"phase starts must increase: got \[0, 5, 5\]"):
        Schedule([Phase(0, {"web": 1}), Phase(5, {"web": 1}), Phase(5, {"code": 1})])
    with pytest.raises(ConfigurationError, match=r"stream 'web' has weight -1"):
        Phase(0, {"web": -1})
    with pytest.raises(ConfigurationError, match=r"gives every stream weight 0"):
        Phase(0, {"web": 0})
    with pytest.raises(ConfigurationError, match=r"names streams \['books'\] that the dataset lacks"):
        _epochs(Schedule([Phase(0, {"web": 1, "books": 1})]), NAMES, 1, 0, tmp_path)
    with pytest.raises(ConfigurationError, match=r"streams \['math'\] have no weight in any phase"):
        _epochs(Schedule([Phase(0, {"web": 1, "code": 1})]), NAMES, 1, 0, tmp_path)
    mid_step = Schedule([Phase(0, {"web": 1, "code": 1, "math": 1}), Phase(30, {"web": 1})], unit="sample")
    with pytest.raises(ConfigurationError, match=r"sample 30, which is not a step boundary: .* start it at 24 or 48"):
        _epochs(mid_step, NAMES, 1, 0, tmp_path)
    assert Schedule.from_json(BASE.to_json()) == BASE


def test_a_state_from_another_global_batch_is_refused(tmp_path: Path) -> None:
    state = {"schedule": _epochs(BASE, NAMES, 4, 0, tmp_path).state(0, 48, None, [str(tmp_path / n) for n in NAMES])}
    state["schedule"]["global_batch_size"] = 32
    with pytest.raises(ResumeError, match=r"global batch of 32 samples, and this run's is 24"):
        _epochs(BASE, NAMES, 4, 0, tmp_path).resume(state, [], False)
