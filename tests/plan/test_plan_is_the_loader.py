"""The planner's model of the loader, parameter by parameter, against a real ``ShardCache`` and ``StreamingDataset``.

``plan_training`` models download threads, the ``predownload`` default, the window a worker asks shards for,
the shards it downloads first (its first batch's), the DataLoader's prefetched batches, what a shard costs to download and to keep, and the smallest
``cache_limit`` the loader accepts. Each test builds the real object on a small dataset written here and
reads the figure the loader uses; whichever side changes alone, a test fails.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mds_core.plan.plan as plan_module
from mds_core import LocalDataset
from mds_core.errors import ConfigurationError
from mds_core.format.index import ShardInfo
from mds_core.order.world import World
from mds_core.plan import plan_training
from mds_core.plan.timing import request_window
from mds_core.storage.shard_cache import ShardCache
from mds_core.streaming.dataset import StreamingDataset
from mds_core.streaming.prefetch import Prefetch
from tests.streaming.support import write_rows

BATCH = 4
ONE_WORKER = World(num_nodes=1, ranks_per_node=1, workers_per_rank=1)  # a test process: one rank, no workers


def _write(out: Path) -> list[ShardInfo]:
    """About 12 compressed shards of 100 samples, each sample's bytes different, so none compresses to nothing."""
    rng = np.random.default_rng(0)
    rows = ({"id": i, "x": rng.bytes(64) * 10} for i in range(100))
    write_rows(out, {"id": "int", "x": "bytes"}, rows, compression="zstd", size_limit="8kb")
    shards = LocalDataset(str(out)).shards
    assert len(shards) > 4 and all(shard.zip_data is not None for shard in shards)
    return shards


@pytest.fixture
def remote(tmp_path: Path) -> tuple[str, list[ShardInfo]]:
    return str(tmp_path / "remote"), _write(tmp_path / "remote")


def _dataset(tmp_path: Path, remote: str, name: str, **kwargs) -> StreamingDataset:
    return StreamingDataset(
        remote=remote, local=str(tmp_path / name), batch_size=BATCH, job_root=str(tmp_path / f"jobs-{name}"), **kwargs
    )


def _recorded(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Every object the planner makes with ``plan_module.<name>`` from now on, in order."""
    made: list[Any] = []
    make = getattr(plan_module, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(make(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(plan_module, name, recording)
    return made


def _planned_threads(monkeypatch: pytest.MonkeyPatch, shards: list[ShardInfo], **kwargs) -> int:
    """The download threads ``plan_training`` times each worker's first burst with."""
    with monkeypatch.context() as patched:
        timers = _recorded(patched, "_Timer")
        plan_training([shards], ONE_WORKER, BATCH, **kwargs)
    return timers[0].threads


def _pool_size(dataset: StreamingDataset) -> int:
    """How many downloads the stream's cache really runs at once, once iteration has started."""
    [reader] = dataset.readers
    iterator = iter(dataset)
    assert isinstance(iterator, Generator)  # closed below, so that its workers stop
    next(iterator)
    try:
        return reader.shard_cache._transfers.slots
    finally:
        iterator.close()


def test_download_threads_are_the_caches_with_and_without_a_cache_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote
) -> None:
    url, shards = remote
    unlimited = _dataset(tmp_path, url, "unlimited")
    minimum = plan_training([shards], ONE_WORKER, BATCH).settings["loader_minimum_cache_limit"]
    limited = _dataset(tmp_path, url, "limited", cache_limit=minimum * 2)
    assert unlimited.readers[0].shard_cache.threads == _pool_size(unlimited)
    assert limited.readers[0].shard_cache.threads == _pool_size(limited)
    assert _planned_threads(monkeypatch, shards) == _pool_size(unlimited) == 8
    assert _planned_threads(monkeypatch, shards, cache_limit=minimum * 2) == _pool_size(limited) == 2
    bare = ShardCache(limited.streams[0].store(), str(tmp_path / "bare"), shards)  # the rule is the cache's own
    assert bare.threads == 8 and ShardCache(bare.store, bare.root, shards, cache_limit=1 << 30).threads == 2


@pytest.mark.filterwarnings("ignore:predownload < batch_size")  # 2: a window narrower than a batch
@pytest.mark.parametrize("predownload", [None, 2, 10])
def test_predownload_and_the_request_window_are_the_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote, predownload: int | None
) -> None:
    url, shards = remote
    dataset = _dataset(tmp_path, url, "cache", predownload=predownload)
    plan = plan_training([shards], ONE_WORKER, BATCH, predownload=predownload)
    assert plan.settings["predownload"] == dataset.predownload == (predownload or 8 * BATCH)
    asked: list[int] = []
    up_to = Prefetch.up_to

    def recording(self: Prefetch, position: int) -> None:
        asked.append(position)
        up_to(self, position)

    monkeypatch.setattr(Prefetch, "up_to", recording)
    iterator = iter(dataset)
    assert isinstance(iterator, Generator)  # closed below, so that its workers stop
    next(iterator)
    iterator.close()
    assert asked[0] == request_window(dataset.predownload)  # the first shards a worker asks for at once


def test_the_prefetched_batches_are_the_dataloaders(tmp_path: Path, remote) -> None:
    from mds_core.streaming.loader import StreamingDataLoader

    loader = StreamingDataLoader(_dataset(tmp_path, remote[0], "cache"), batch_size=BATCH, num_workers=1)
    assert loader.prefetch_factor == plan_module._PREFETCH_BATCHES


@pytest.mark.parametrize("keep_zip", [False, True])
def test_what_a_shard_costs_to_download_and_to_keep_is_the_caches(tmp_path: Path, remote, keep_zip: bool) -> None:
    url, shards = remote
    dataset = _dataset(tmp_path, url, "cache", keep_zip=keep_zip)
    cache = dataset.readers[0].shard_cache
    planned = plan_module.Shards.of([shards], keep_zip)
    assert planned.cached.tolist() == [cache.shard_bytes(i) for i in range(len(shards))]
    assert sorted(int(sample["id"]) for sample in dataset) == list(range(100))
    stats = cache.stats.as_dict()
    [node] = plan_training([shards], ONE_WORKER, BATCH, keep_zip=keep_zip).epochs[0].nodes
    assert stats["shards_downloaded"] == len(shards) == node.shards_downloaded
    assert stats["bytes_downloaded"] == node.bytes_downloaded == sum((s.zip_data or s.raw_data).bytes for s in shards)
    on_disk = sum(path.stat().st_size for path in (tmp_path / "cache").glob("shard.*"))
    assert on_disk == node.peak_cache_bytes  # without a limit, every shard stays


@pytest.mark.parametrize("order", [{}, {"shuffle": True, "shuffle_block_size": 300}, {"shuffle": True}])
def test_the_smallest_cache_limit_and_the_order_are_the_datasets(tmp_path: Path, remote, order: dict) -> None:
    url, shards = remote
    plan = plan_training([shards], ONE_WORKER, BATCH, **order)
    minimum = plan.settings["loader_minimum_cache_limit"]
    accepted = _dataset(tmp_path, url, "enough", cache_limit=minimum, **order)
    with pytest.raises(ConfigurationError, match=f"Increase the `cache_limit` to at least {minimum:,} bytes"):
        _dataset(tmp_path, url, "short", cache_limit=minimum - 1, **order)
    spec = accepted.order_spec
    assert plan.settings["num_canonical_nodes"] == spec.canonical_nodes(1)
    assert plan.settings["shuffle_block_size"] == spec.block_size(1)
    assert (plan.settings["shuffle"], plan.settings["shuffle_algo"]) == (spec.shuffle, spec.shuffle_algo)
    assert plan.settings["samples_per_epoch"] == accepted.epoch_size == 100


def test_the_shards_downloaded_first_are_those_of_a_workers_first_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, remote
) -> None:
    """The planner's heads (downloaded before the rest of the burst) are the shards the loader's first batch reads."""
    from mds_core.streaming.loader import StreamingDataLoader

    url, shards = remote
    timers, node_fetches = _recorded(monkeypatch, "_Timer"), _recorded(monkeypatch, "NodeFetches")
    plan_training([shards], ONE_WORKER, BATCH, shuffle=True)
    fetched = timers[0].nodes[0][1]
    planned = set(fetched[node_fetches[0].in_head].tolist())
    dataset = _dataset(tmp_path, url, "cache", shuffle=True)
    first_batch = next(iter(StreamingDataLoader(dataset, batch_size=BATCH, num_workers=1)))
    read = set(np.searchsorted(dataset._shard_ends, np.asarray(first_batch["id"]), side="right").tolist())
    assert len(read) > 1 and planned == read  # a shuffled batch of 4 reads several shards
