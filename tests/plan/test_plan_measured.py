"""The plan against real epochs streamed from the loopback S3 server: exact figures exactly, modelled ones within 25%."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mds_core import Phase, Schedule, StreamingDataLoader, StreamingDataset
from mds_core.order.world import World
from mds_core.plan import plan_training
from mds_core.plan.source import load_streams, probe
from tests.streaming.support import run_ranks, write_rows
from testsupport.s3 import object_gets

ORDER: dict[str, Any] = {"shuffle": True, "num_canonical_nodes": 2, "shuffle_block_size": 44}


def _write(url: str, samples: int, payload: int, size_limit: int) -> None:
    rng = np.random.default_rng(0)
    rows = ({"id": i, "payload": rng.bytes(payload)} for i in range(samples))
    write_rows(url, {"id": "int", "payload": "bytes"}, rows, size_limit=size_limit)


def _config(remote: Any, folder: Path, dataset_kwargs: dict, per_node: bool = True) -> dict[str, Any]:
    """``_run_ranks``'s configuration: batches of 4 from 2 workers per rank, a cache per node if ``per_node``."""
    node = "-{node}" if per_node else ""
    return {
        "remote": remote,
        "local": str(folder / f"cache{node}"),
        "batch_size": 4,
        "num_workers": 2,
        "job_root": str(folder / f"jobs{node}"),
        "dataset_kwargs": dataset_kwargs,
    }


def _shard_files(cache: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in cache.iterdir() if p.name.startswith("shard.") and p.is_file()}


@pytest.mark.parametrize(("nodes", "ranks_per_node"), [(1, 2), (2, 1)])
def test_downloads_and_cache_per_node_are_exactly_the_plans(
    s3_server, tmp_path: Path, nodes: int, ranks_per_node: int
) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, samples=480, payload=1000, size_limit=12_000)
    plan = plan_training(
        load_streams([url]), World(num_nodes=nodes, ranks_per_node=ranks_per_node, workers_per_rank=2), 4, **ORDER
    )
    since = s3_server.log_position()
    config = _config(url, tmp_path, ORDER)
    outputs = run_ranks(tmp_path, nodes * ranks_per_node, ranks_per_node, config)
    assert Counter(i for out in outputs for batch in out["batches"] for i in batch) == Counter(range(480))
    cached = [_shard_files(tmp_path / f"cache-{node}") for node in range(nodes)]
    for node, files in zip(plan.epochs[0].nodes, cached):
        assert node.shards_downloaded == len(files) and node.bytes_downloaded == sum(files.values())
        assert node.peak_cache_bytes == sum(files.values()) and node.refetched_shards == 0
    gets = object_gets(s3_server.requests(since), bucket)
    expected = Counter(f"data/{name}" for files in cached for name in files)
    assert {key: count for key, count in gets.items() if key != "data/index.json"} == dict(expected)
    if nodes == 2:
        assert sum(expected.values()) > len(set(expected))  # nodes share some shards: each fetched its own copy


@pytest.mark.slow  # two real rank processes streaming two remote streams
def test_a_scheduled_runs_downloads_per_node_are_exactly_the_plans(s3_server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    urls = {name: f"s3://{bucket}/{name}" for name in ("web", "code")}
    _write(urls["web"], samples=480, payload=1000, size_limit=12_000)
    _write(urls["code"], samples=240, payload=700, size_limit=9_000)
    schedule = Schedule([Phase(0, {"web": 1.0}), Phase(20, {"web": 0.5, "code": 0.5})])
    world = World(num_nodes=2, ranks_per_node=1, workers_per_rank=2)
    plan = plan_training(
        load_streams(list(urls.values())), world, 4, shuffle=True, schedule=schedule, stream_names=list(urls)
    )
    since = s3_server.log_position()
    config = _config(
        [[name, url] for name, url in urls.items()], tmp_path, {"shuffle": True, "schedule": schedule.to_json()}
    )
    outputs = run_ranks(tmp_path, 2, 1, config)
    assert sum(len(batch) for out in outputs for batch in out["batches"]) == plan.settings["samples_per_epoch"] == 720
    for node, planned in enumerate(plan.epochs[0].nodes):
        files = {
            f"{name}/{file}": size
            for name in urls
            for file, size in _shard_files(tmp_path / f"cache-{node}" / name).items()
        }
        assert planned.shards_downloaded == len(files) and planned.bytes_downloaded == sum(files.values())
    gets = object_gets(s3_server.requests(since), bucket)
    assert sum(count for key, count in gets.items() if not key.endswith("index.json")) == sum(
        node.shards_downloaded for node in plan.epochs[0].nodes
    )


def test_the_recommended_cache_limit_downloads_every_shard_once(s3_server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, samples=1200, payload=1000, size_limit=12_000)
    streams = load_streams([url])
    world = World(workers_per_rank=2)
    plan = plan_training(streams, world, 4, **ORDER)
    limit = next(r.value for r in plan.recommendations if r.setting == "cache_limit")
    total = sum(s.raw_data.bytes for s in streams[0])
    assert limit is not None and limit < total  # a real limit, so eviction happens
    assert plan_training(streams, world, 4, cache_limit=limit, **ORDER).epochs[0].nodes[0].refetched_shards == 0
    since = s3_server.log_position()
    config = _config(url, tmp_path, {**ORDER, "cache_limit": limit}, per_node=False)
    outputs = run_ranks(tmp_path, 1, 1, config)
    assert sorted(i for batch in outputs[0]["batches"] for i in batch) == list(range(1200))
    gets = object_gets(s3_server.requests(since), bucket)
    assert {k: v for k, v in gets.items() if k != "data/index.json"} == {
        f"data/{s.raw_data.basename}": 1 for s in streams[0]
    }
    assert sum(_shard_files(tmp_path / "cache").values()) <= limit


@pytest.mark.timing
@pytest.mark.parametrize("rate", [1_000_000, 2_000_000])
def test_modelled_first_batch_and_throughput_are_within_a_quarter_of_measured(
    s3_server, fault_proxy, tmp_path: Path, rate: int
) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, samples=600, payload=10_000, size_limit=520_000)  # 12 shards of 50 samples, ~0.5 MB each
    fault_proxy.rate = rate
    # Four shards through the throttled link. The faster of two probes, as for the epochs below: other load
    # on the machine can only slow a probe down (CI once measured 1.2 of 2 MB/s in one).
    probes = [probe(url, max_bytes=2_100_000) for _ in range(2)]
    environment = max(probes, key=lambda found: found.bandwidth or 0.0)
    assert environment.bandwidth == pytest.approx(rate, rel=0.25)
    order: dict[str, Any] = {"shuffle": True, "shuffle_block_size": 100}
    modelled = plan_training(load_streams([url]), World(), 16, environment=environment, **order).epochs[0]
    # The best of two epochs, each from an empty cache: a wall time can only be slowed by other load.
    runs = [_timed_epoch(url, tmp_path / f"run{i}", order) for i in range(2)]
    first_batch, samples_per_second = min(r[0] for r in runs), max(r[1] for r in runs)
    assert modelled.nodes[0].first_batch_seconds == pytest.approx(first_batch, rel=0.25)
    assert modelled.samples_per_second == pytest.approx(samples_per_second, rel=0.25)


def _timed_epoch(url: str, folder: Path, order: dict) -> tuple[float, float]:
    """(seconds to the first batch, samples per second) of one epoch through StreamingDataLoader."""
    dataset = StreamingDataset(
        remote=url, local=str(folder / "cache"), batch_size=16, job_root=str(folder / "jobs"), **order
    )
    loader = StreamingDataLoader(dataset, batch_size=16, num_workers=0)
    began = time.perf_counter()
    first_batch, samples = None, 0
    for batch in loader:
        first_batch = first_batch or time.perf_counter() - began
        samples += len(batch["id"])
    seconds = time.perf_counter() - began
    assert samples == 600 and first_batch is not None
    return first_batch, samples / seconds
