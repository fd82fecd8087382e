"""An epoch's first batches alone (``generate_head``): exactly the whole epoch's, at a cost flat in the resume point."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.order import OrderSpec, generate_work, get_partitions, get_shuffle
from mds_core.order.partition import leading_rounds
from mds_core.order.shuffle.py1e_keys import PackedKeys
from mds_core.order.work import generate_head

pytestmark = [
    pytest.mark.filterwarnings("ignore:Shuffle block size was smaller than shard size:UserWarning"),
    pytest.mark.filterwarnings("ignore:(Trying|Attempting) to partition .* repeats many samples:UserWarning"),
]


@settings(max_examples=300, deadline=None)
@given(
    num_samples=st.integers(1, 3000),
    canonical=st.integers(1, 8),
    world=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 9)),
    drop=st.floats(0, 1),
    rounds=st.integers(1, 4),
)
def test_leading_rounds_are_the_partitions_first_batches(
    num_samples: int, canonical: int, world: tuple[int, int, int, int], drop: float, rounds: int
) -> None:
    nodes, ranks, workers, batch = world
    nodes = canonical * nodes if nodes % 2 else max(1, canonical // nodes)  # compatible node counts
    if canonical % nodes and nodes % canonical:
        return
    drop_first = int(num_samples * drop)
    args = (num_samples, canonical, nodes, ranks, workers, batch, drop_first)
    head = leading_rounds(*args, rounds)
    if head is None:  # refused only where the rounds reach the end of a canonical row
        per_row = -(-num_samples // canonical)
        assert (
            num_samples <= canonical
            or drop_first + nodes * ranks * workers * batch * rounds > (per_row - 2) * canonical
        )
        return
    whole = get_partitions("orig", *args)
    assert head.shape == (nodes, ranks, workers, rounds, batch)
    assert np.array_equal(head, whole[:, :, :, :rounds])


def _spec(streams: list[list[int]], **options: object) -> OrderSpec:
    """Two streams are mixed half and half, which resamples them."""
    weights = [{"proportion": 1.0 / len(streams)} for _ in streams] if len(streams) > 1 else []
    return OrderSpec(shard_sizes=streams, weights=weights, **options)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    streams=st.lists(st.lists(st.integers(0, 150), min_size=1, max_size=8), min_size=1, max_size=2).filter(
        lambda streams: all(sum(stream) >= 8 for stream in streams)
    ),
    shuffle=st.booleans(),
    canonical=st.sampled_from([1, 2, 4]),
    nodes=st.sampled_from([1, 2]),
    ranks=st.integers(1, 3),
    workers=st.integers(1, 3),
    batch=st.integers(1, 8),
    block=st.sampled_from([None, 50, 300]),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 3),
    point=st.floats(0, 1),
    rounds=st.integers(1, 3),
)
def test_the_head_is_the_whole_epochs_first_batches(
    streams: list[list[int]],
    shuffle: bool,
    canonical: int,
    nodes: int,
    ranks: int,
    workers: int,
    batch: int,
    block: int | None,
    seed: int,
    epoch: int,
    point: float,
    rounds: int,
) -> None:
    spec = _spec(
        streams,
        shuffle=shuffle,
        shuffle_seed=seed,
        num_canonical_nodes=canonical,
        shuffle_block_size=block,
        batch_size=batch,
        partition_algo="orig",
    )
    size = sum(sum(stream) for stream in streams)
    sample_in_epoch = int(size * point) // (nodes * ranks * batch) * nodes * ranks * batch
    head = generate_head(spec, nodes, ranks, workers, epoch, sample_in_epoch, rounds)
    whole = generate_work(spec, nodes, ranks, workers, epoch, sample_in_epoch)
    if head is None:
        assert whole.shape[3] <= rounds + 2 * canonical  # refused only near the end of the epoch
        return
    assert np.array_equal(head, whole[:, :, :, :rounds])


@pytest.mark.parametrize(
    "options",
    [dict(batching_method="per_stream"), dict(shuffle=True, shuffle_algo="py1s")],
    ids=["another-batching", "another-shuffle"],
)
def test_methods_without_a_shortcut_get_none(options: dict) -> None:
    spec = _spec([[40, 30], [50, 20]], batch_size=4, num_canonical_nodes=2, **options)
    assert generate_head(spec, 1, 2, 2, 0, 0, 1) is None


def test_a_window_of_py1e_is_the_whole_shuffles() -> None:
    sizes = [150_000, 90_000, 200_000, 70_000, 120_000]
    whole = get_shuffle("py1e", sizes, 2, 17, 1, 260_000)
    part = get_shuffle("py1e", sizes, 2, 17, 1, 260_000, starts=[1000, 0], stops=[41_000, 5])
    assert np.array_equal(part[1000:41_000], whole[1000:41_000])
    assert np.array_equal(part[315_000:315_005], whole[315_000:315_005])


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=40),
    canonical=st.integers(1, 3),
    block=st.integers(4, 200),
    seed=st.integers(0, 2**31),
    window=st.tuples(st.floats(0, 1), st.floats(0, 0.3)),
)
def test_a_window_far_from_most_units_is_the_whole_shuffles(
    sizes: list[int], canonical: int, block: int, seed: int, window: tuple[float, float]
) -> None:
    # Small blocks: most units lie far from the window, and their keys are jumped over, not drawn.
    n = sum(sizes)
    if n < 4 * canonical:
        return
    whole = get_shuffle("py1e", sizes, canonical, seed, 3, block)
    bounds = [n * k // canonical for k in range(canonical + 1)]
    lengths = [hi - lo for lo, hi in zip(bounds, bounds[1:])]
    starts = [int(length * window[0]) for length in lengths]
    stops = [min(length, start + 1 + int(length * window[1])) for start, length in zip(starts, lengths)]
    part = get_shuffle("py1e", sizes, canonical, seed, 3, block, starts=starts, stops=stops)
    for lo, start, stop in zip(bounds, starts, stops):
        assert np.array_equal(part[lo + start : lo + stop], whole[lo + start : lo + stop])


def _head_seconds(spec: OrderSpec, sample_in_epoch: int) -> float:
    began = time.perf_counter()
    assert generate_head(spec, 1, 8, 2, 0, sample_in_epoch, 4) is not None
    return time.perf_counter() - began


def test_the_heads_cost_does_not_grow_with_what_is_left_of_the_epoch() -> None:
    # 10**7 samples in 1000 shards: the whole epoch's order takes ~1 s here, the window a fraction.
    spec = OrderSpec(shard_sizes=[[10_000] * 1000], shuffle=True, num_canonical_nodes=8, batch_size=256)
    early = min(_head_seconds(spec, 8 * 256 * 10) for _ in range(2))
    late = min(_head_seconds(spec, 8 * 256 * 3500) for _ in range(2))
    began = time.perf_counter()
    generate_work(spec, 1, 8, 2, 0, 8 * 256 * 10)
    whole = time.perf_counter() - began
    assert early < 0.5 * whole, (early, whole)
    assert early < 1.5 * late, (early, late)


def test_a_window_that_outreaches_the_samples_drawn_is_ordered_from_all_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Keys lie within half a block of their index, so this never happens; if it did, every key is drawn.
    sizes = [300] * 40
    whole = get_shuffle("py1e", sizes, 1, 8, 0, 100)
    monkeypatch.setattr(PackedKeys, "window_within", lambda *args: False)
    drawn_again: list[int] = []
    draw_again = PackedKeys.draw_again

    def counting(self: PackedKeys) -> None:
        drawn_again.append(len(self.skipped))
        draw_again(self)

    monkeypatch.setattr(PackedKeys, "draw_again", counting)
    part = get_shuffle("py1e", sizes, 1, 8, 0, 100, starts=[6000], stops=[6100])
    assert drawn_again and drawn_again[0] > 30
    assert np.array_equal(part[6000:6100], whole[6000:6100])
