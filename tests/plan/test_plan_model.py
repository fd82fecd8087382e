"""The planner on its own: the cache replay, the smallest limit, the time model, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.order import OrderSpec, generate_work
from mds_core.order.world import World
from mds_core.plan import Environment, plan_training
from mds_core.plan.cache import LRUCache, live_bytes, smallest_limit_without_refetch
from mds_core.plan.reads import node_reads
from mds_core.plan.timing import NodeFetches, simulate_epoch
from tests.plan.support import DATASETS, S0, S1, plan_text, refused, run_plan, shard_infos


def _reads(sizes: list[int], world: World, batch: int, **order):
    spec = OrderSpec(shard_sizes=[sizes], batch_size=batch, **order)
    work = generate_work(spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank, 0)
    return work, np.cumsum(sizes)


def test_node_reads_hold_exactly_the_samples_each_node_reads_per_step() -> None:
    sizes = [7, 5, 9, 3, 8]
    world = World(num_nodes=2, ranks_per_node=2, workers_per_rank=2)
    work, ends = _reads(sizes, world, 2, shuffle=True, shuffle_block_size=10)
    for node in range(2):
        reads = node_reads(work, node, ends)
        node_work = work[node]  # (ranks, workers, batches, batch)
        for step in range(reads.num_steps):
            ids = node_work[:, step % 2, step // 2].ravel()
            expected = set(np.searchsorted(ends, ids[ids >= 0], side="right").tolist())
            assert set(reads.shards[reads.steps == step].tolist()) == expected


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=4, max_size=12),
    seed=st.integers(0, 1000),
    nodes=st.integers(1, 2),
    block=st.integers(40, 120),
)
def test_without_a_limit_every_read_shard_is_fetched_once_and_the_smallest_limit_is_tight(
    sizes, seed, nodes, block
) -> None:
    world = World(num_nodes=nodes, ranks_per_node=2, workers_per_rank=1)
    work, ends = _reads(sizes, world, 2, shuffle=True, shuffle_seed=seed, shuffle_block_size=block)
    cached = np.array(sizes, np.int64) * 10
    for node in range(nodes):
        reads = node_reads(work, node, ends)
        replay = LRUCache(cached, cached, None).replay(reads)
        used = reads.used()
        assert replay.fetched_shards == len(used) and replay.refetched_shards == 0
        assert replay.fetched_bytes == replay.peak_bytes == int(cached[used].sum())
        for lead in (0, 3):  # shards fetched as they are first needed, or three steps ahead
            limit = smallest_limit_without_refetch(reads, cached, cached, lead)
            assert limit >= live_bytes(reads, cached).max(initial=0)
            assert LRUCache(cached, cached, limit).replay(reads, lead).refetched_shards == 0
            smaller = limit - int(cached[used].min())
            if smaller >= live_bytes(reads, cached).max(initial=0) and smaller > 0:
                assert LRUCache(cached, cached, smaller).replay(reads, lead, stop_at_refetch=True).refetched_shards > 0


def test_a_limit_below_the_working_set_refetches_and_never_exceeds_the_limit() -> None:
    sizes = [10] * 20
    cached = np.full(20, 1000, np.int64)
    work, ends = _reads(sizes, World(), 4, shuffle=True, shuffle_block_size=200)
    reads = node_reads(work, 0, ends)
    replay = LRUCache(cached, cached, 3000).replay(reads)
    assert replay.refetched_shards > 0 and replay.peak_bytes <= 3000
    assert replay.fetched_shards == 20 + replay.refetched_shards
    assert max(replay.footprint) <= 3000


def test_the_time_model_is_compute_bound_or_link_bound() -> None:
    steps = 100
    needed = np.arange(0, 100, 10, dtype=np.int64)
    sizes = np.full(10, 1_000_000, np.int64)
    none = NodeFetches(needed, sizes, np.zeros(10, bool))
    compute_bound = simulate_epoch([none], steps, 0.5, lead_steps=20, bandwidth=1e9, latency=0.0)
    assert compute_bound.seconds == pytest.approx(steps * 0.5, rel=1e-3)
    link_bound = simulate_epoch([none], steps, 0.0, lead_steps=1, bandwidth=1e6, latency=0.0)
    assert link_bound.seconds == pytest.approx(10.0)  # ten 1 MB shards at 1 MB/s, nothing else to do
    burst = NodeFetches(needed, sizes, np.arange(10) < 3)
    timing = simulate_epoch([burst], steps, 0.0, lead_steps=1, bandwidth=1e6, latency=0.25)
    assert timing.first_batch_seconds == [pytest.approx(3.25)]  # the first three share the link, then step 0 runs


def test_plan_figures_add_up_over_nodes_and_epochs() -> None:
    shards = shard_infos([50] * 16)
    one_node = plan_training([shards], World(ranks_per_node=2, workers_per_rank=2), 5, epochs=2, shuffle=True)
    assert [n.shards_downloaded for e in one_node.epochs for n in e.nodes] == [16, 0]  # all cached after epoch 0
    assert one_node.epochs[1].nodes[0].peak_cache_bytes == 16 * 5000
    environment = Environment(bandwidth=1e6, consume_seconds=1e-3)
    world = World(num_nodes=2, ranks_per_node=2, workers_per_rank=2)
    plan = plan_training([shards], world, 5, epochs=2, shuffle=True, environment=environment)
    first, second = plan.epochs
    assert sum(n.shards_downloaded for n in first.nodes) >= 16  # every shard is read by some node
    for before, after in zip(first.nodes, second.nodes):  # without a limit nothing leaves the cache
        assert after.peak_cache_bytes == before.peak_cache_bytes + after.bytes_downloaded
    for node in first.nodes:
        assert node.first_batch_seconds is not None and node.data_wait_fraction is not None  # modelled
        assert node.first_batch_seconds > 0 and 0 <= node.data_wait_fraction < 1
    assert first.seconds is not None and first.samples_per_second == pytest.approx(800 / first.seconds)
    assert [r.setting for r in plan.recommendations] == ["cache_limit", "predownload", "shuffle_block_size"]
    json.dumps(plan.to_json(with_curves=True))


def test_mds_plan_prints_a_table_json_and_a_plot(tmp_path: Path) -> None:
    args = [S0, S1, "--world", "2x2x2", "--batch-size", "4", "--bandwidth", "10mb", "--consume-time", "0.001"]
    text = plan_text(*args)
    assert "smallest cache_limit without repeated downloads" in text and "epoch 0:" in text
    # stdout alone: stderr may carry library notices (matplotlib building its font cache)
    data = json.loads(run_plan(*args, "--json", "--plot", str(tmp_path / "plan.png")).stdout)
    assert data["settings"]["world"] == "2 node(s) x 2 rank(s), 2 worker(s)" and len(data["epochs"][0]["nodes"]) == 2
    index_shards = sum(len(json.loads((DATASETS / s / "index.json").read_text())["shards"]) for s in ("s0", "s1"))
    assert data["settings"]["shards"] == index_shards
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mds_plan_on_a_missing_dataset_names_its_index(tmp_path: Path) -> None:
    assert f"{tmp_path / 'nothing'}/index.json" in refused(str(tmp_path / "nothing"), "--batch-size", "4")
