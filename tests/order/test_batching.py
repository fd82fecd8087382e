"""Whole-epoch work (spec ordering.md §6-§8): the reference's arrays, defaults, errors and properties."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mds_core.errors import ConfigurationError
from mds_core.order import OrderSpec, generate_work, replicate_world, resample_streams, traversal_order
from mds_core.order.batching import stratified_portions
from mds_core.order.traversal import to_global_batches
from tests.order.golden_cases import check_case, golden, without_trailing_padding

# The small test datasets trigger the reference's advisory warnings: py1e blocks smaller than a shard,
# and tiny partitions that repeat samples.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Shuffle block size was smaller than shard size:UserWarning"),
    pytest.mark.filterwarnings("ignore:(Trying|Attempting) to partition .* repeats many samples:UserWarning"),
]

EPOCHS = golden("epochs")
STREAM_SHARDS = EPOCHS["stream_shard_sizes"]


def _case_id(case: dict) -> str:
    kw, world = case["dataset_kwargs"], case["world"]
    weights = "-".join(next((k for k in s if k != "name"), "none") for s in case["streams"])
    return (
        f"{kw['batching_method']}-{kw['shuffle_algo'] if kw['shuffle'] else 'noshuffle'}-{weights}-"
        f"P{world['num_nodes']}R{world['ranks_per_node']}W{world['workers_per_rank']}B{case['batch_size']}-"
        f"e{case['epoch']}s{case['sample_in_epoch']}"
    )


def _work_of_case(case: dict) -> np.ndarray:
    spec = OrderSpec(
        shard_sizes=[STREAM_SHARDS[s["name"]] for s in case["streams"]],
        weights=[{k: v for k, v in s.items() if k != "name"} for s in case["streams"]],
        batch_size=case["batch_size"],
        **case["dataset_kwargs"],
    )
    world = case["world"]
    nodes, ranks, workers = world["num_nodes"], world["ranks_per_node"], world["workers_per_rank"]
    return generate_work(spec, nodes, ranks, workers, case["epoch"], case["sample_in_epoch"])


@pytest.mark.parametrize("case", EPOCHS["cases"], ids=[_case_id(c) for c in EPOCHS["cases"]])
def test_generate_work_reproduces_the_reference_epoch(case: dict) -> None:
    check_case(case, lambda: _work_of_case(case), "ids")


# OrderSpec: defaults and validation


def test_default_canonical_nodes_depend_on_the_shuffle_algorithm() -> None:
    assert OrderSpec([[10]], shuffle_algo="py1e").canonical_nodes(3) == 3
    assert OrderSpec([[10]], shuffle_algo="naive").canonical_nodes(2) == 2
    assert OrderSpec([[10]], shuffle_algo="py1s").canonical_nodes(3) == 192
    assert OrderSpec([[10]], shuffle_algo="py2s").canonical_nodes(1) == 64
    assert OrderSpec([[10]], num_canonical_nodes=5).canonical_nodes(3) == 5
    assert OrderSpec([[10]], num_canonical_nodes=0).canonical_nodes(4) == 4  # 0 means "default", as the reference


@pytest.mark.parametrize(
    ("canonical_nodes", "block"), [(1, 4_000_000), (2, 2_000_000), (15, 266_666), (16, 262_144), (64, 262_144)]
)
def test_default_shuffle_block_size_follows_canonical_nodes(canonical_nodes, block) -> None:
    assert OrderSpec([[10]], num_canonical_nodes=canonical_nodes).block_size(1) == block
    assert OrderSpec([[10]], num_canonical_nodes=canonical_nodes, shuffle_block_size=7).block_size(1) == 7


def test_order_spec_normalizes_and_is_hashable() -> None:
    # An array of sizes is accepted as a stream's sizes too (OrderSpec's annotation says Sequence[int]).
    spec = OrderSpec([[3, 4], cast("Sequence[int]", np.array([5]))], weights=[{"choose": 2}, None], epoch_size=None)
    assert spec.shard_sizes == ((3, 4), (5,))
    assert spec.samples_per_epoch == 7
    assert hash(spec) == hash(OrderSpec(((3, 4), (5,)), weights=[{"choose": 2}, {}]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batching_method": "round_robin"}, "batching_method"),
        ({"shuffle_algo": "py1b"}, "shuffle_algo"),
        ({"partition_algo": "fast"}, "partition_algo"),
        ({"sampling_method": "uniform"}, "sampling_method"),
        ({"sampling_granularity": 0}, "sampling_granularity"),
        ({"shuffle_seed": -1}, "shuffle_seed"),
        ({"batch_size": 2.0}, "batch_size"),
        ({"batch_size": "8"}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_canonical_nodes": -2}, "num_canonical_nodes"),
        ({"shuffle_block_size": 1.5}, "shuffle_block_size"),
        ({"replication": 0}, "replication"),
        ({"epoch_size": "lots"}, "epoch_size"),
        ({"shuffle": "yes"}, "shuffle"),
        ({"weights": [{"proportion": 1}, {"choose": 3}]}, "cannot be mixed"),
        ({"weights": [{"repeat": 2}, None], "epoch_size": 10}, "epoch_size"),
    ],
)
def test_invalid_settings_raise_configuration_errors_naming_the_setting(kwargs, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OrderSpec([[10, 5], [7]], **kwargs)


@pytest.mark.parametrize("shard_sizes", [[], [[]], [[0, 0]], [[3], [0]], [[3, -1]], [[1.5]], "abc"])
def test_empty_or_malformed_streams_are_refused(shard_sizes) -> None:
    with pytest.raises(ConfigurationError):
        OrderSpec(shard_sizes)


BATCHED = OrderSpec([[10]], batch_size=2)
PER_STREAM = OrderSpec([[40], [40]], num_canonical_nodes=2, batching_method="device_per_stream", batch_size=2)


@pytest.mark.parametrize(
    ("spec", "world", "epoch", "sample_in_epoch", "message"),
    [
        (OrderSpec([[10]]), (1, 1, 1), 0, 0, "batch_size"),
        (PER_STREAM, (4, 1, 1), 0, 0, "multiple of 4"),  # device_per_stream: canonical nodes divisible by nodes
        (BATCHED, (0, 1, 1), 0, 0, "num_nodes must be an integer >= 1, got 0"),
        (BATCHED, (1, 1, 0), 0, 0, "workers_per_rank must be an integer >= 1, got 0"),
        (BATCHED, (1, 1, 1), -1, 0, "epoch must be an integer >= 0, got -1"),
        (BATCHED, (1, 1, 1), 0, -8, "sample_in_epoch must be an integer >= 0, got -8"),
    ],
)
def test_generate_work_refuses_what_it_cannot_order(
    spec: OrderSpec, world: tuple[int, int, int], epoch: int, sample_in_epoch: int, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        generate_work(spec, *world, epoch, sample_in_epoch)


def test_generate_work_accepts_objects_carrying_an_order_spec() -> None:
    spec = OrderSpec([[10, 6]], batch_size=4, shuffle=True, num_canonical_nodes=1)
    dataset = SimpleNamespace(order_spec=spec)
    assert np.array_equal(generate_work(dataset, 1, 2, 1, 0, 0), generate_work(spec, 1, 2, 1, 0, 0))
    with pytest.raises(TypeError):
        generate_work(SimpleNamespace(), 1, 1, 1, 0, 0)


# Replication


@pytest.mark.parametrize(
    ("world", "replication", "parallel"),
    [
        ((2, 8), None, (2, 8)),
        ((2, 8), 1, (2, 8)),
        ((2, 8), 2, (1, 8)),
        ((4, 8), 2, (2, 8)),
        ((1, 8), 4, (1, 2)),
        ((3, 4), 3, (1, 4)),
        ((2, 4), 8, (1, 1)),
    ],
)
def test_replication_shrinks_the_world_partitioning_sees(world, replication, parallel) -> None:
    nodes, ranks = world
    assert replicate_world(nodes, ranks, replication) == parallel


@pytest.mark.parametrize("replication", [3, 16])
def test_replication_must_divide_the_world(replication) -> None:
    with pytest.raises(ConfigurationError, match="divisible by replication"):
        replicate_world(1, 8, replication)


def test_replicated_work_equals_the_smaller_world() -> None:
    spec = OrderSpec([[50, 30]], batch_size=2, shuffle=True, replication=4, num_canonical_nodes=1)
    plain = OrderSpec([[50, 30]], batch_size=2, shuffle=True, num_canonical_nodes=1)
    assert np.array_equal(generate_work(spec, 2, 4, 2, 0, 0), generate_work(plain, 1, 2, 2, 0, 0))


# Spec examples


def _global_order(work: np.ndarray) -> list[int]:
    return [int(i) for i in traversal_order(work) if i >= 0]


def test_one_device_without_shuffle_and_one_canonical_node_reads_in_order() -> None:
    spec = OrderSpec([[3, 5], [2, 4, 6]], batch_size=4, num_canonical_nodes=1)
    assert _global_order(generate_work(spec, 1, 1, 3, 0, 0)) == list(range(20))


@pytest.mark.parametrize("world", [(1, 2, 1, 2), (2, 1, 2, 2), (1, 4, 1, 1)])
def test_appendix_example_has_the_same_global_batches_on_every_world(world) -> None:
    nodes, ranks, workers, batch = world
    spec = OrderSpec(
        [[3, 5, 2, 4, 6]], shuffle=True, shuffle_seed=7, num_canonical_nodes=2, shuffle_block_size=6, batch_size=batch
    )
    work = generate_work(spec, nodes, ranks, workers, 0, 0)  # py1e warns: the block is smaller than some shards
    batches = [sorted(b) for b in np.array(_global_order(work)).reshape(-1, 4).tolist()]
    assert batches == [
        sorted(b) for b in [[8, 14, 3, 6], [9, 18, 4, 7], [15, 17, 5, 10], [16, 2, 12, 13], [1, 0, 11, 19]]
    ]
    if world == (1, 4, 1, 1):
        assert work[0, :, 0, :, 0].tolist() == [
            [8, 9, 15, 16, 1],
            [3, 4, 5, 12, 11],
            [14, 18, 17, 2, 0],
            [6, 7, 10, 13, 19],
        ]


@pytest.mark.parametrize(
    ("proportions", "global_batch", "portions"),
    [
        ((1 / 3, 1 / 3, 1 / 3), 4, [1, 1, 2]),  # ties go to the higher stream index
        ((0.25, 0.25, 0.5), 6, [1, 2, 3]),
        ((0.5, 0.2, 0.3), 8, [4, 2, 2]),
    ],
)
def test_stratified_portions_round_like_the_reference(proportions, global_batch, portions) -> None:
    assert stratified_portions(proportions, global_batch).tolist() == portions


# Properties

ALGOS = ["py1e", "py1br", "py1s", "py2s", "naive"]


@st.composite
def epoch_settings(draw, batching_methods=("random",)):
    shards = [draw(st.lists(st.integers(2, 60), min_size=1, max_size=5)) for _ in range(draw(st.integers(1, 3)))]
    weighting = draw(st.sampled_from([None, "repeat", "proportion"]))
    values = {"repeat": st.sampled_from([0.5, 1, 1.5, 2.25]), "proportion": st.floats(0.2, 1)}
    weights = [{weighting: draw(values[weighting])} if weighting else None for _ in shards]
    nodes = draw(st.sampled_from([1, 1, 2, 4]))
    canonical = nodes * draw(st.sampled_from([1, 2])) if draw(st.booleans()) else None
    spec = OrderSpec(
        shards,
        weights=weights,
        shuffle=draw(st.booleans()),
        shuffle_algo=draw(st.sampled_from(ALGOS)),
        shuffle_seed=draw(st.integers(0, 10_000)),
        num_canonical_nodes=canonical,
        shuffle_block_size=draw(st.sampled_from([None, 8, 40])),
        sampling_method=draw(st.sampled_from(["balanced", "fixed"])),
        sampling_granularity=draw(st.integers(1, 4)),
        batch_size=draw(st.integers(1, 4)),
        partition_algo=draw(st.sampled_from(["orig", "relaxed"])),
        batching_method=draw(st.sampled_from(batching_methods)),
    )
    world = (nodes, draw(st.sampled_from([1, 2, 3])), draw(st.integers(1, 3)))
    return spec, world


def _resampled(spec: OrderSpec, epoch: int) -> np.ndarray:
    return resample_streams(
        spec.shard_sizes,
        spec.mix.choose,
        seed=spec.shuffle_seed,
        epoch=epoch,
        sampling_method=spec.sampling_method,
        sampling_granularity=spec.sampling_granularity,
        shuffle=spec.shuffle,
    )[1]


@settings(max_examples=120, deadline=None)
@given(settings_=epoch_settings(), epoch=st.integers(0, 3))
def test_random_batching_covers_the_resampled_epoch_with_repeats_only_at_the_tail(settings_, epoch) -> None:
    spec, (nodes, ranks, workers) = settings_
    canonical = spec.canonical_nodes(nodes)
    assume(spec.samples_per_epoch >= max(canonical, nodes * ranks) * 2)
    work = generate_work(spec, nodes, ranks, workers, epoch, 0)
    assert np.array_equal(work, generate_work(spec, nodes, ranks, workers, epoch, 0))  # deterministic
    order = traversal_order(work)
    expected = Counter(_resampled(spec, epoch).tolist())
    seen = Counter(order[order >= 0].tolist())
    assert not expected - seen  # everything resampled is read at least as often as drawn
    # Repeats (short canonical rows, pad columns, node padding) and -1 sit in the last global batches.
    global_batch = nodes * ranks * spec.batch_size
    tail = global_batch * (math.ceil((canonical + nodes + nodes * ranks) / global_batch) + workers + 1)
    head = order[: max(len(order) - tail, 0)]
    assert np.all(head >= 0)
    assert not Counter(head.tolist()) - expected


@settings(max_examples=30, deadline=None)
@given(settings_=epoch_settings(("random", "per_stream", "stratified")))
def test_fixed_sampling_reads_the_same_samples_every_epoch(settings_) -> None:
    spec, world = settings_
    spec = replace(spec, sampling_method="fixed", batching_method="random")
    resampled = [sorted(_resampled(spec, epoch).tolist()) for epoch in range(3)]
    assert resampled[0] == resampled[1] == resampled[2]
    assume(spec.samples_per_epoch >= max(spec.canonical_nodes(world[0]), world[0] * world[1]) * 2)
    nodes, ranks, workers = world
    covered = [set(_global_order(generate_work(spec, nodes, ranks, workers, epoch, 0))) for epoch in range(3)]
    assert covered[0] == covered[1] == covered[2] == set(resampled[0])


@settings(max_examples=120, deadline=None)
@given(settings_=epoch_settings(), epoch=st.integers(0, 2), data=st.data())
def test_resuming_after_whole_global_batches_continues_the_same_order(settings_, epoch, data) -> None:
    spec, (nodes, ranks, workers) = settings_
    assume(spec.samples_per_epoch >= max(spec.canonical_nodes(nodes), nodes * ranks) * 4)
    global_batch = nodes * ranks * spec.batch_size
    full = _global_order(generate_work(spec, nodes, ranks, workers, epoch, 0))
    done = data.draw(st.integers(0, spec.samples_per_epoch // global_batch)) * global_batch
    resumed = _global_order(generate_work(spec, nodes, ranks, workers, epoch, done))
    # Identical up to the tail repeats, which the reference also recomputes for the shorter remainder.
    remaining = spec.samples_per_epoch - done
    tail = global_batch * (math.ceil((spec.canonical_nodes(nodes) + nodes + nodes * ranks) / global_batch) + 1)
    assert len(resumed) >= remaining
    compared = max(remaining - tail, 0)
    assert resumed[:compared] == full[done : done + compared]


@settings(max_examples=80, deadline=None)
@given(settings_=epoch_settings(("per_stream", "stratified", "device_per_stream")), data=st.data())
def test_stream_aware_batching_resumes_at_global_batch_granularity(settings_, data) -> None:
    spec, (nodes, ranks, workers) = settings_
    if spec.batching_method == "device_per_stream":
        spec = replace(spec, num_canonical_nodes=nodes * 2)
    try:
        full = generate_work(spec, nodes, ranks, workers, 1, 0)
    except ConfigurationError:
        assume(False)  # streams too small for this world's batches: refused, which the fixtures cover
    global_batch = nodes * ranks * spec.batch_size
    full_batches = without_trailing_padding(to_global_batches(full, global_batch))
    skipped = data.draw(st.integers(0, len(full_batches)))
    offset = data.draw(st.integers(0, global_batch - 1))  # a partial batch resumes at its start
    resumed = generate_work(spec, nodes, ranks, workers, 1, skipped * global_batch + offset)
    assert np.array_equal(without_trailing_padding(to_global_batches(resumed, global_batch)), full_batches[skipped:])


@pytest.mark.parametrize(("samples", "dropped"), [(10, 2), (8, 0), (11, 3)])
def test_device_per_stream_warns_exactly_when_real_samples_are_dropped(caplog, samples: int, dropped: int) -> None:
    spec = OrderSpec(shard_sizes=[[samples]], batching_method="device_per_stream", batch_size=4, num_canonical_nodes=1)
    with caplog.at_level("WARNING", logger="mds_core.order.batching"):
        work = generate_work(spec, 1, 1, 1, 0)
    assert int(np.count_nonzero(work >= 0)) == samples - dropped
    messages = [r.getMessage() for r in caplog.records]
    assert messages == (
        [f"device_per_stream batching drops {dropped} sample(s) of stream 0 on node 0 that do not fill a device batch"]
        if dropped
        else []
    )
