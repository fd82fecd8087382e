"""Loader telemetry: per-worker counters published through the job directory, and the loader's waits.

Local data checks the counts that do not depend on timing; the loopback S3 server (``s3_server``,
tests/conftest.py) checks downloads against what the index says and what the server served.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from mds_core import StreamingDataLoader, StreamingDataset
from mds_core.errors import ConfigurationError
from mds_core.storage.cache_stats import FIELDS as CACHE_FIELDS
from mds_core.storage.cache_stats import CacheStats
from mds_core.storage.remote import open_store
from mds_core.streaming.telemetry import WORKER_FIELDS
from tests.streaming.support import first_batches, three_streams, write_rows
from testsupport.s3 import object_gets

TOP_KEYS = {"rank", "batches", "samples", "wait_seconds", "wait_max_seconds", "workers", "totals"}


def _local(tmp_path: Path, **kwargs) -> StreamingDataset:
    return three_streams(tmp_path / "jobs", **kwargs)


def _tag_worker(samples: list[dict]) -> dict[str, list[int]]:
    """A collate_fn that records which DataLoader worker made each batch (0: the main process)."""
    info = torch.utils.data.get_worker_info()
    worker = 0 if info is None else info.id
    return {"id": [int(s["id"]) for s in samples], "worker": [worker] * len(samples)}


def _ids_by_worker(loader: StreamingDataLoader) -> dict[int, list[int]]:
    by_worker: dict[int, list[int]] = defaultdict(list)
    for batch in loader:
        by_worker[batch["worker"][0]].extend(batch["id"])
    return dict(by_worker)


def _metrics_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "jobs").rglob("metrics-*"))


# Local data


@pytest.mark.parametrize("num_workers", [0, 2])
def test_local_epoch_counts_samples_per_worker_and_every_wait(tmp_path: Path, num_workers: int) -> None:
    dataset = _local(tmp_path, shuffle=True, num_canonical_nodes=2)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=num_workers, collate_fn=_tag_worker)
    by_worker = _ids_by_worker(loader)
    metrics = loader.metrics()
    assert set(metrics) == TOP_KEYS and json.loads(json.dumps(metrics)) == metrics
    workers = max(1, num_workers)
    assert metrics["rank"] == 0 and metrics["batches"] == 105 and metrics["samples"] == 420
    assert [w["worker"] for w in metrics["workers"]] == list(range(workers)) == sorted(by_worker)
    for entry in metrics["workers"]:
        assert set(entry) == {"worker", *WORKER_FIELDS}
        assert entry["samples"] == len(by_worker[entry["worker"]])
        assert entry["decode_seconds"] > 0
        assert all(entry[name] == 0 for name in CACHE_FIELDS)  # local data: no cache, no downloads
    assert metrics["totals"]["samples"] == 420
    assert metrics["totals"]["decode_seconds"] == pytest.approx(sum(w["decode_seconds"] for w in metrics["workers"]))
    assert 0 < metrics["wait_max_seconds"] <= metrics["wait_seconds"]
    assert _metrics_files(tmp_path) == [f"metrics-r0-w{w}.f64" for w in range(workers)]


def test_counters_are_per_iteration(tmp_path: Path) -> None:
    loader = StreamingDataLoader(_local(tmp_path), batch_size=4, num_workers=2)
    for _ in range(2):
        assert sum(len(batch["id"]) for batch in loader) == 420
        metrics = loader.metrics()
        assert metrics["batches"] == 105 and metrics["totals"]["samples"] == 420  # not 840
    first_batches(loader, 10)  # part of a third epoch: only what this iteration read
    metrics = loader.metrics()
    assert metrics["batches"] == 10 and metrics["samples"] == 40
    assert 40 <= metrics["totals"]["samples"] <= 420


def test_the_dataset_reports_its_own_worker_without_a_loader(tmp_path: Path) -> None:
    dataset = _local(tmp_path)
    assert dataset.metrics() == {"rank": 0, "workers": [], "totals": dict.fromkeys(WORKER_FIELDS, 0)}
    assert len(list(dataset)) == 420
    metrics = dataset.metrics()
    assert [w["worker"] for w in metrics["workers"]] == [0] and metrics["totals"]["samples"] == 420
    dataset.reset_metrics()
    assert dataset.metrics()["workers"] == [] and _metrics_files(tmp_path) == []


def test_the_callback_gets_metrics_every_n_batches_and_at_the_end(tmp_path: Path) -> None:
    calls: list[dict] = []
    loader = StreamingDataLoader(
        _local(tmp_path), batch_size=4, num_workers=2, metrics_callback=calls.append, metrics_every=10
    )
    batches_seen_at_call: list[int] = []
    for step, _batch in enumerate(loader):
        batches_seen_at_call.extend([step] * (len(calls) - len(batches_seen_at_call)))
    assert [c["batches"] for c in calls] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 105]
    assert batches_seen_at_call == [9, 19, 29, 39, 49, 59, 69, 79, 89, 99]  # before the 10th batch is handed out
    assert calls[-1] == loader.metrics() and calls[-1]["totals"]["samples"] == 420
    assert all(c["samples"] == 4 * c["batches"] for c in calls)
    # Every 105 batches: the call of the last batch, then the one at the end.
    calls.clear()
    loader = StreamingDataLoader(_local(tmp_path), batch_size=4, metrics_callback=calls.append, metrics_every=105)
    assert len(list(loader)) == 105
    assert [c["batches"] for c in calls] == [105, 105]


@pytest.mark.parametrize("every", [0, -1, 2.5, True])
def test_metrics_every_must_be_a_positive_int(tmp_path: Path, every: object) -> None:
    with pytest.raises(ConfigurationError, match="metrics_every must be an int >= 1"):
        StreamingDataLoader(_local(tmp_path), batch_size=4, metrics_callback=print, metrics_every=every)  # type: ignore[arg-type]  # wrong on purpose


def test_telemetry_off_lists_no_workers_and_writes_no_files(tmp_path: Path) -> None:
    calls: list[dict] = []
    loader = StreamingDataLoader(
        _local(tmp_path, telemetry=False), batch_size=4, num_workers=2, metrics_callback=calls.append, metrics_every=50
    )
    assert sum(len(batch["id"]) for batch in loader) == 420
    metrics = loader.metrics()
    assert metrics["workers"] == [] and metrics["totals"] == dict.fromkeys(WORKER_FIELDS, 0)
    assert metrics["batches"] == 105 and metrics["samples"] == 420  # the loader's own side stays on
    assert [c["batches"] for c in calls] == [50, 100, 105]
    assert _metrics_files(tmp_path) == []


def test_cache_stats_are_per_process() -> None:
    stats = CacheStats()
    stats.record_download(100, 0.5)
    stats.record_download(50, 0.25)
    stats.record_lookup(hit=False, wait_seconds=0.5)
    stats.record_lookup(hit=True, wait_seconds=0.0)
    stats.record_eviction()
    downloads = {"shards_downloaded": 2, "bytes_downloaded": 150, "download_seconds": 0.75, "download_max_seconds": 0.5}
    lookups = {"cache_hits": 1, "cache_misses": 1, "evictions": 1, "shard_wait_seconds": 0.5}
    assert stats.as_dict() == downloads | lookups
    assert pickle.loads(pickle.dumps(stats)).as_dict() == dict.fromkeys(CACHE_FIELDS, 0)
    shared = np.zeros(len(CACHE_FIELDS))
    CacheStats(shared).record_eviction()
    assert shared[CACHE_FIELDS.index("evictions")] == 1


# Loopback S3


def _write_s3(url: str, n: int) -> None:
    rng = np.random.default_rng(n)
    rows = ({"id": i, "payload": rng.bytes(int(rng.integers(100, 400)))} for i in range(n))
    write_rows(url, {"id": "int", "payload": "bytes"}, rows, size_limit=4096)


def _s3_dataset(url: str, tmp_path: Path, **kwargs) -> StreamingDataset:
    cache, jobs = str(tmp_path / "cache"), str(tmp_path / "jobs")
    return StreamingDataset(remote=url, local=cache, batch_size=4, shuffle=True, job_root=jobs, **kwargs)


def test_s3_downloads_each_shard_once_per_node_over_two_workers(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write_s3(url, 400)
    dataset = _s3_dataset(url, tmp_path, num_canonical_nodes=2)
    shard_of = np.repeat(np.arange(len(dataset.shards)), [s.samples for s in dataset.shards])
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=_tag_worker)
    by_worker = _ids_by_worker(loader)
    assert Counter(i for ids in by_worker.values() for i in ids) == Counter(range(400))
    metrics = loader.metrics()
    totals, workers = metrics["totals"], metrics["workers"]
    shards = len(dataset.shards)
    assert shards > 10
    assert totals["shards_downloaded"] == shards  # each shard fetched once on the node, by one of the workers
    assert totals["bytes_downloaded"] == sum(s.raw_data.bytes for s in dataset.shards)
    assert totals["cache_misses"] >= shards
    for entry in workers:
        ids = by_worker[entry["worker"]]
        assert entry["samples"] == len(ids)
        # Each worker asks for every shard it reads once; a shard is a hit only if the other worker had it ready.
        assert entry["cache_hits"] + entry["cache_misses"] == len(set(shard_of[ids].tolist()))
        assert entry["cache_misses"] >= entry["shards_downloaded"] and entry["evictions"] == 0
        assert entry["download_max_seconds"] <= entry["download_seconds"]
        assert (entry["shards_downloaded"] > 0) == (entry["download_max_seconds"] > 0)
    assert totals["download_max_seconds"] == max(w["download_max_seconds"] for w in workers)
    assert metrics["batches"] == 100 and totals["samples"] == 400


def test_s3_evictions_under_a_cache_limit_match_the_servers_gets(s3_server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write_s3(url, 600)
    store = open_store(url)
    sizes = {k: store.fs.size(f"{bucket}/data/{k}") for k in store.list() if k != "index.json"}
    limit = 4 * max(sizes.values()) + 20_000  # as in tests/storage: the limit bites
    dataset = _s3_dataset(url, tmp_path, cache_limit=limit, shuffle_algo="py1s", num_canonical_nodes=1)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=1)
    for epoch in range(2):  # the second epoch starts from what the first left in the cache
        since = s3_server.log_position()
        assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(600))
        gets = {key: n for key, n in object_gets(s3_server.requests(since), bucket).items() if key != "data/index.json"}
        (worker,) = loader.metrics()["workers"]
        assert worker["evictions"] > 0 and worker["samples"] == 600, epoch
        assert worker["bytes_downloaded"] == sum(n * sizes[key.removeprefix("data/")] for key, n in gets.items())
        assert worker["shards_downloaded"] == sum(gets.values())
        assert worker["cache_hits"] + worker["cache_misses"] >= len(sizes)
        # One process: each miss is one of its own downloads (a prefetched shard evicted before use: two).
        assert worker["cache_misses"] <= worker["shards_downloaded"]
        assert epoch or worker["cache_misses"] >= len(sizes)  # an empty cache misses every shard
