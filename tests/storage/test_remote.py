"""Remote shard stores against a real S3-compatible server (moto, in its own process) on 127.0.0.1.

Faults come from ``testsupport.fault_proxy.FaultProxy`` between the client and the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from click.testing import CliRunner

from mds_core import MDSWriter, StreamingDataset, cli, merge_index
from mds_core.errors import (
    ConfigurationError,
    HashMismatchError,
    MissingDependencyError,
    OutputExistsError,
    StorageError,
)
from mds_core.storage.first_byte import DEADLINE_ENV
from mds_core.storage.remote import open_store
from mds_core.streaming.jobdir import user_dir
from tests.streaming.support import run_ranks
from testsupport.fault_proxy import Fault
from testsupport.s3 import object_gets

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = {"id": "int", "payload": "bytes"}


def _samples(n: int) -> list[dict]:
    rng = np.random.default_rng(n)
    return [{"id": i, "payload": rng.bytes(int(rng.integers(100, 400)))} for i in range(n)]


def _write(url: str, n: int = 240, **kwargs) -> list[dict]:
    samples = _samples(n)
    options = {"size_limit": 4096, **kwargs}
    with MDSWriter(out=url, columns=COLUMNS, **options) as writer:
        for sample in samples:
            writer.write(sample)
    return samples


def _dataset(url: str, tmp_path: Path, name: str = "cache", **options: Any) -> StreamingDataset:
    """A dataset of ``url`` cached in ``tmp_path / name``: batches of 4 and ``tmp_path / "jobs"`` unless told."""
    options = {"batch_size": 4, "job_root": str(tmp_path / "jobs"), **options}
    return StreamingDataset(remote=url, local=str(tmp_path / name), **options)


def _ids(dataset: StreamingDataset) -> list[int]:
    return [int(sample["id"]) for sample in dataset]


def read_by_two_ranks_of_two_workers(url: str, tmp_path: Path) -> None:
    """Two ranks of one node, two loader workers each, read every sample of ``url`` (400 of them) exactly once."""
    config = {"remote": url, "local": str(tmp_path / "cache"), "batch_size": 4, "num_workers": 2}
    config |= {"job_root": str(tmp_path / "jobs"), "dataset_kwargs": {"shuffle": True, "num_canonical_nodes": 2}}
    outputs = run_ranks(tmp_path / "ranks", 2, 2, config)
    assert Counter(i for out in outputs for batch in out["batches"] for i in batch) == Counter(range(400))


def _shard_bytes_in(directory: Path) -> int:
    total = 0
    for entry in os.scandir(directory):
        if entry.name.startswith("shard."):
            with contextlib.suppress(FileNotFoundError):  # evicted while we looked
                total += entry.stat().st_size
    return total


def _no_temporary_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*") if p.name.endswith(".tmp")]


def _download_threads(besides: Collection[threading.Thread] = ()) -> list[threading.Thread]:
    """The shard caches' download threads alive in this process, except ``besides`` (a closed pool's end once idle)."""
    return [t for t in threading.enumerate() if t.name.startswith("mds-download") and t not in besides]


# ------------------------------------------------------------------------------------------------
# the store


SERVERS = {"s3": "s3_server", "gcs": "gcs_server", "azure": "azurite_server", "volumes": "volumes_server"}


@pytest.fixture(params=["local", *sorted(SERVERS)])
def store_url(request, tmp_path: Path) -> str:
    """Each store's root: a local folder, or a fresh bucket, container or volume on a server on 127.0.0.1."""
    if request.param == "local":
        return str(tmp_path / "store")
    return f"{request.getfixturevalue(SERVERS[request.param]).new_root()}/store"


def test_store_operations(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    source = tmp_path / "source.bin"
    source.write_bytes(b"abc" * 1000)
    store.upload(str(source), "dir/a.bin")
    store.write_bytes("dir/b.txt", b"hello")
    assert store.list() == ["dir/a.bin", "dir/b.txt"] and store.exists("dir/a.bin")
    store.download("dir/a.bin", str(tmp_path / "copy.bin"), expected_bytes=3000)
    assert (tmp_path / "copy.bin").read_bytes() == b"abc" * 1000
    assert store.write_if_absent("v/1", b"first") and not store.write_if_absent("v/1", b"second")
    assert store.read_bytes("v/1") == b"first"
    store.move("dir/b.txt", "dir/c.txt")
    assert store.read_bytes("dir/c.txt") == b"hello" and not store.exists("dir/b.txt")
    store.delete_tree("dir")
    assert store.list() == ["v/1"]
    with pytest.raises(StorageError, match=r"download of .*store/missing.bin failed: FileNotFoundError"):
        store.download("missing.bin", str(tmp_path / "never"))
    assert not (tmp_path / "never").exists() and _no_temporary_files(tmp_path)


@pytest.mark.parametrize(
    "url, extra",
    [
        ("hf://datasets/org/repo", "hf"),
        ("s3://bucket/x", "s3"),  # opened on first use, but its package is looked for at once
        ("gs://bucket/x", "gcs"),
        ("az://container/x", "azure"),
        ("dbfs:/Volumes/c/s/v", "databricks"),
    ],
)
def test_a_missing_backend_names_the_extra(url: str, extra: str, monkeypatch) -> None:
    from mds_core.storage.stores import store_kind

    monkeypatch.setitem(sys.modules, store_kind(url).package, None)  # as if not installed (dev has gcsfs, adlfs)
    with pytest.raises(MissingDependencyError, match=rf"{url}: .*pip install 'mds-pipelines\[{extra}\]'"):
        open_store(url)


def test_dbfs_needs_databricks_credentials(monkeypatch, tmp_path: Path) -> None:
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CLIENT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no.databrickscfg"))
    with pytest.raises(
        ConfigurationError,
        match="dbfs:/Volumes/cat/sch/vol: no usable Databricks credentials: set DATABRICKS_HOST with DATABRICKS_TOKEN",
    ):
        open_store("dbfs:/Volumes/cat/sch/vol")


# ------------------------------------------------------------------------------------------------
# writer -> S3 -> dataset


def test_cache_limit_evicts_over_a_whole_epoch(s3_server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, n=600)
    store = open_store(url)
    shards = [k for k in store.list() if k != "index.json"]
    largest = max(store.fs.size(f"{bucket}/data/{k}") for k in shards)
    limit = 4 * largest + 20_000
    cache = tmp_path / "cache"
    order: dict[str, Any] = {"shuffle": True, "shuffle_algo": "py1s", "num_canonical_nodes": 1}
    expected = _ids(_dataset(url, tmp_path, "unlimited", **order))
    since = s3_server.log_position()
    dataset = _dataset(url, tmp_path, cache_limit=limit, **order)
    ids, peak = [], 0
    for sample in dataset:
        ids.append(int(sample["id"]))
        peak = max(peak, _shard_bytes_in(cache))
    assert ids == expected and sorted(ids) == list(range(600))
    assert peak <= limit and len(shards) * largest > 2 * limit  # the limit really bit
    assert len(list(cache.glob("shard.*"))) < len(shards)
    gets = object_gets(s3_server.requests(since), bucket)
    assert all(gets[f"data/{key}"] >= 1 for key in shards)


def test_a_cache_limit_too_small_for_the_order_fails_at_construction(s3_server, tmp_path: Path) -> None:
    """Issue 40, item 16: one minimum, ours, stated once, after the reference's first words; and it is enough."""
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=300)

    def build(limit: int) -> StreamingDataset:
        return _dataset(url, tmp_path, "c", shuffle=True, cache_limit=limit, job_root=str(tmp_path / f"jobs-{limit}"))

    with pytest.raises(ConfigurationError) as caught:
        build(5000)  # less than the index: the reference's "Minimum cache usage" case
    message = str(caught.value)
    match = re.fullmatch(
        r"Minimum cache usage is larger than the cache limit \(5000 bytes\)\. Increase the `cache_limit` to at least "
        r"([\d,]+) bytes for this order \(shuffle=True, shuffle_algo='py1e', block [\d,]+, 1 canonical node\(s\) over "
        r"1 node\(s\)\): this node reads 1 place\(s\) at once \(the larger of its ranks and its canonical nodes\), "
        r"each working on about (\d+) shard\(s\), so the cache holds (\d+) shard\(s\) of up to ([\d,]+) bytes \(the "
        r"largest\) and ([\d,]+) bytes of index\. Or lower shuffle_block_size or num_canonical_nodes, or use "
        r"shuffle_algo='py1s'",
        message,
    )
    assert match, message
    need, shards, largest, index = (int(match[i].replace(",", "")) for i in (1, 3, 4, 5))
    assert need == shards * largest + index and index > 5000 and message.count(match[1]) == 1
    with pytest.raises(ConfigurationError) as above_the_index:  # the reference's other case: the same one minimum
        build(index + 1)
    assert str(above_the_index.value) == message.replace(
        "Minimum cache usage is larger than the cache limit (5000 bytes)", f"Cache limit ({index + 1} bytes) is too low"
    )
    with pytest.raises(ConfigurationError, match=r"to at least"):
        build(need - 1)
    assert build(need).cache_limit == need  # the minimum stated is enough


def test_validate_hash_detects_a_corrupted_object(s3_server, tmp_path: Path) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, hashes=["sha1"])
    client = boto3.client("s3", endpoint_url=s3_server.endpoint)
    body = bytearray(client.get_object(Bucket=bucket, Key="data/shard.00001.mds")["Body"].read())
    body[-1] ^= 0xFF  # same size, one flipped bit pattern
    client.put_object(Bucket=bucket, Key="data/shard.00001.mds", Body=bytes(body))
    dataset = _dataset(url, tmp_path, validate_hash="sha1", download_retry=1)
    with pytest.raises(HashMismatchError, match=rf"s3://{bucket}/data/shard.00001.mds: sha1 checksum mismatch"):
        _ids(dataset)
    assert not (tmp_path / "cache" / "shard.00001.mds").exists() and _no_temporary_files(tmp_path / "cache")


def test_validate_hash_needs_a_recorded_algorithm(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, hashes=["sha1"])
    with pytest.raises(ConfigurationError, match=r"validate_hash='md5' but shard.00000.mds records only \['sha1'\]"):
        _dataset(url, tmp_path, validate_hash="md5")


def test_local_none_picks_a_cache_per_remote_and_user(s3_server, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    url_a, url_b = (f"s3://{s3_server.new_bucket()}/data" for _ in range(2))
    _write(url_a, n=50)
    _write(url_b, n=60)
    a = StreamingDataset(remote=url_a, batch_size=4, job_root=str(tmp_path / "jobs"))
    b = StreamingDataset(remote=url_b, batch_size=4, job_root=str(tmp_path / "jobs"))
    user_cache = Path(user_dir(str(tmp_path))) / "cache"
    assert {Path(a.streams[0].local).parent, Path(b.streams[0].local).parent} == {user_cache}
    assert a.streams[0].local != b.streams[0].local
    assert sorted(_ids(a)) == list(range(50)) and sorted(_ids(b)) == list(range(60))


def test_merge_index_over_remote_partitions(s3_server, tmp_path: Path) -> None:
    root = f"s3://{s3_server.new_bucket()}/merged"
    parts = [_write(f"{root}/part{i}", n=30 + i) for i in range(3)]
    merge_index(root)  # finds the partitions on the server
    store = open_store(root)
    index = json.loads(store.read_bytes("index.json"))
    assert {s["raw_data"]["basename"].split("/")[0] for s in index["shards"]} == {"part0", "part1", "part2"}
    listed = tmp_path / "listed"
    merge_index([f"{root}/part2/index.json", f"{root}/part0/index.json"], (str(listed), root), keep_local=True)
    assert json.loads((listed / "index.json").read_text()) == json.loads(store.read_bytes("index.json"))
    assert _ids(_dataset(root, tmp_path)) == [s["id"] for s in parts[2] + parts[0]]


def test_the_cli_reads_urls(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=40, compression="zstd")
    inspect = CliRunner().invoke(cli.main, ["inspect", "--json", url])
    assert inspect.exit_code == 0, inspect.output
    assert json.loads(inspect.output)["samples"] == 40
    verify = CliRunner().invoke(cli.main, ["verify", "--decode", url])
    assert verify.exit_code == 0 and "OK" in verify.output, verify.output
    head = CliRunner().invoke(cli.main, ["head", "-n", "1", url])
    assert head.exit_code == 0 and "id: 0" in head.output, head.output


# ------------------------------------------------------------------------------------------------
# writer failures (the matrix of test_stores.py has the retried faults)


def test_a_failed_upload_publishes_no_index(s3_server, fault_proxy, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    fault_proxy.add(Fault("status", method="PUT", path=r"shard\.00003\.mds", value=503, times=10))
    with pytest.raises(StorageError, match=rf"upload to {url}/shard.00003.mds failed after 2 attempt\(s\)"):
        _write(url, n=200)
    fault_proxy.clear()
    assert not open_store(url).exists("index.json")


def test_an_existing_remote_index_is_refused_or_retracted(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=50)
    with pytest.raises(OutputExistsError, match=rf"{url}/index.json already exists"):
        MDSWriter(out=url, columns=COLUMNS)
    writer = MDSWriter(out=url, columns=COLUMNS, exist_ok=True)
    assert not open_store(url).exists("index.json")  # an interrupted overwrite leaves no stale index
    writer.abort()


_KILLED_WRITER = """
import sys
from mds_core import MDSWriter
writer = MDSWriter(out=sys.argv[1], columns={"id": "int", "payload": "bytes"}, size_limit=4096, max_workers=1)
for i in range(10_000):
    writer.write({"id": i, "payload": bytes(300)})
    if i == 100:
        print("writing", flush=True)
writer.finish()
"""


def test_a_writer_killed_mid_upload_leaves_no_index(s3_server, fault_proxy, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    fault_proxy.add(Fault("delay", method="PUT", path=r"shard\.", value=0.2, times=1000))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, url], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    fault_proxy.clear()
    store = open_store(url)
    assert any(k.startswith("shard.") for k in store.list())  # it was mid-upload
    assert not store.exists("index.json")


def test_spawned_loader_workers_stream_from_s3(s3_server, tmp_path: Path) -> None:
    from mds_core import StreamingDataLoader

    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=200, compression="zstd")
    dataset = _dataset(url, tmp_path, batch_size=8, shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context="spawn")
    ids = [int(i) for batch in loader for i in batch["id"]]
    assert sorted(ids) == list(range(200))


# ------------------------------------------------------------------------------------------------
# clients across fork, one client per stream, samples handed out as their shards arrive


def test_a_forked_child_opens_its_own_client_and_never_frees_the_parents(s3_server, tmp_path: Path) -> None:
    """Freeing the inherited s3fs client would wait ~1 s on the parent's event-loop thread, absent in a child; the
    botocore reader's pooled connections are the parent's. The child builds both from the parent's sessions."""
    import gc
    import weakref

    from mds_core.storage import clients

    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=40)
    store = open_store(url)
    index = store.read_bytes("index.json")  # the parent's reader is live: session, connections
    assert store.exists("index.json")  # and its s3fs client: session, connections, loop thread
    parent_client, parent_reader = weakref.ref(store.fs), weakref.ref(store.reader)
    parent_session, parent_reader_session = store.fs.session, store.reader.session
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child reports through the pipe)
        try:
            same_bytes = store.read_bytes("index.json") == index  # through the child's own reader
            found = store.exists("index.json")  # through the child's own s3fs client
            own, own_reader = store.fs, store.reader
            gc.collect()
            findings: dict[str, object] = {
                "same_bytes": same_bytes and found,
                "own_client": own is not parent_client() and own_reader is not parent_reader(),
                "parent_client_kept": parent_client() is not None and parent_reader() is not None,
                "inherited": clients.inherited_clients(),
                "session_taken_over": own.session is parent_session and own_reader.session is parent_reader_session,
            }
        except BaseException as err:
            findings = {"error": repr(err)}
        os.write(write, json.dumps(findings).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert report.pop("inherited", 0) >= 2, report
    assert report == {"same_bytes": True, "own_client": True, "parent_client_kept": True, "session_taken_over": True}
    assert store.read_bytes("index.json") == index  # the parent's client still works


def test_a_dataset_reads_its_index_and_shards_through_one_client(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=100)
    dataset = _dataset(url, tmp_path, batch_size=8)
    (stream,), (reader,) = dataset.streams, dataset.readers
    assert reader.shard_cache.store is stream.store()
    client = stream.store().reader
    assert sorted(_ids(dataset)) == list(range(100))
    assert stream.store().reader is client and stream.store()._fs is None  # botocore's alone: no s3fs client


def test_a_loader_epoch_sends_one_get_per_file_and_nothing_else(
    s3_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mds_core import StreamingDataLoader

    monkeypatch.setenv(DEADLINE_ENV, "off")  # a loaded machine's late loopback answer would be asked for again

    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/data"
    _write(url, n=300, compression="zstd")
    files = open_store(url).list()
    since = s3_server.log_position()
    loader = StreamingDataLoader(_dataset(url, tmp_path, batch_size=8, shuffle=True), batch_size=8, num_workers=2)
    for _epoch in range(2):  # the second epoch reads the cache only
        assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(300))
    # This bucket's only: an earlier test's loop that left early may still be finishing its downloads.
    requests = [r for r in s3_server.requests(since) if r.path.lstrip("/").split("/")[0] == bucket]
    assert object_gets(requests, bucket) == {f"data/{key}": 1 for key in files}
    assert len(requests) == len(files)  # no HEAD, no listing


def test_the_first_sample_waits_for_its_own_shard_only(s3_server, fault_proxy, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=240)  # ~15 samples a shard: the first step of 64 samples spans shards 0-4
    fault_proxy.add(Fault("delay", path=r"/shard\.00003\.mds$", value=3.0))
    dataset = _dataset(url, tmp_path, batch_size=8)
    samples = iter(dataset)
    assert int(next(samples)["id"]) == 0
    assert not (tmp_path / "cache" / "shard.00003.mds").exists()  # still on its way
    assert [int(s["id"]) for s in samples] == list(range(1, 240))


def test_the_first_shard_downloads_alone_before_the_others_start(s3_server, fault_proxy, tmp_path: Path) -> None:
    """The first sample does not share the network with the shards needed after it."""
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=240)
    fault_proxy.add(Fault("delay", path=r"/shard\.00000\.mds$", value=0.6))
    dataset = _dataset(url, tmp_path, batch_size=8)
    assert _ids(dataset) == list(range(240))
    requests = zip(fault_proxy.requests, fault_proxy.arrivals)
    shard_gets = [(path, at) for (method, path), at in requests if method == "GET" and "/shard." in path]
    (first, started), others = shard_gets[0], shard_gets[1:]
    assert first.endswith("/shard.00000.mds") and others
    assert min(at for _, at in others) >= started + 0.5  # they waited for its bytes


def test_a_loader_workers_first_batch_asks_for_all_its_shards_at_once(s3_server, fault_proxy, tmp_path: Path) -> None:
    """A worker hands out whole batches: the shards of its first one start together, those needed later after them."""
    from mds_core import StreamingDataLoader

    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=240)
    first_shard = json.loads(open_store(url).read_bytes("index.json"))["shards"][0]["samples"]
    fault_proxy.add(Fault("delay", path=r"/shard\.00000\.mds$", value=0.6))
    dataset = _dataset(url, tmp_path, batch_size=first_shard + 1)  # the first batch: all of shard 0, one of shard 1
    loader = StreamingDataLoader(dataset, batch_size=first_shard + 1, num_workers=1)
    assert [int(i) for batch in loader for i in batch["id"]] == list(range(240))
    requests = zip(fault_proxy.requests, fault_proxy.arrivals)
    arrived = {path.rsplit("/", 1)[1]: at for (method, path), at in requests if method == "GET" and "/shard." in path}
    assert arrived["shard.00001.mds"] < arrived["shard.00000.mds"] + 0.5  # did not wait for shard 0's bytes
    assert arrived["shard.00002.mds"] >= arrived["shard.00000.mds"] + 0.5  # needed later: waited for them


def test_a_cache_none_of_whose_shards_goes_first_makes_none_wait(s3_server, fault_proxy, tmp_path: Path) -> None:
    """The stream holding none of the first step's shards (``heads=0``) downloads at once, without a head start."""
    import time

    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=240)
    [reader] = _dataset(url, tmp_path).readers
    cache, count = reader.shard_cache, len(reader.shards)
    asked = time.monotonic()
    cache.prefetch(range(count), heads=0)
    for shard in range(count):
        cache.ensure(shard)
    cache.close()
    requests = zip(fault_proxy.requests, fault_proxy.arrivals)
    arrived = [at for (method, path), at in requests if method == "GET" and "/shard." in path]
    assert len(arrived) == count and max(arrived) < asked + 0.5  # none waited out the 1 s head start


def test_an_iteration_left_early_does_not_wait_for_the_downloads_it_started(
    s3_server, fault_proxy, tmp_path: Path
) -> None:
    """``next(iter(dataset))`` returns with its sample; downloads still running finish in the background."""
    import time

    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=240)
    hold = fault_proxy.add(Fault("hold", path=r"/shard\.00002\.mds$", value=60))  # until released
    earlier = set(_download_threads())  # other tests' pools, not yet shut down
    dataset = _dataset(url, tmp_path, batch_size=8)
    assert int(next(iter(dataset))["id"]) == 0  # the iterator is dropped at once: its prefetch stops
    # it did not wait for shard 2, whose request is still held (had it waited, it would have returned after 60 s)
    assert not [r for r in fault_proxy.forwarded if r.method == "GET" and r.path.endswith("/shard.00002.mds")]
    hold.release.set()
    # Whatever was running ends whole, under its real name. Not "until no temporary file is seen": one
    # download may end before the next one past the head start opens its temporary file.
    deadline = time.monotonic() + 30
    while _download_threads(earlier) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _download_threads(earlier) and _no_temporary_files(tmp_path / "cache")
    assert sorted(_ids(dataset)) == list(range(240))


def test_samples_come_in_the_same_order_from_a_remote_as_from_a_local_copy(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=500, compression="zstd")
    settings: dict[str, Any] = {
        "batch_size": 8,
        "shuffle": True,
        "shuffle_block_size": 64,
        "job_root": str(tmp_path / "jobs"),
    }
    remote_ids = _ids(_dataset(url, tmp_path, **settings))
    local_ids = _ids(StreamingDataset(local=str(tmp_path / "cache"), **settings))  # every shard is there now
    assert remote_ids == local_ids and sorted(remote_ids) == list(range(500))


def test_decompressions_take_turns_the_shard_needed_soonest_first() -> None:
    """Downloads end together; decompressing them one slot at a time, in the order they are needed,
    makes the one the reader waits for ready first instead of last."""
    import threading
    import time

    from mds_core.storage.priority_gate import PriorityGate

    gate, order = PriorityGate(1), []
    held = gate.slot(-1)
    held.__enter__()

    def decompress(rank: int) -> None:
        with gate.slot(rank):
            order.append(rank)

    threads = [threading.Thread(target=decompress, args=(rank,)) for rank in (5, 1, 3, 0)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(gate._waiting) < len(threads) and time.monotonic() < deadline:
        time.sleep(0.01)
    held.__exit__(None, None, None)
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 3, 5]


# ------------------------------------------------------------------------------------------------
# oversized downloads (security review, finding 4): never more than the declared size on disk


def _staged_sizes(monkeypatch) -> list[int]:
    """The size of each download's temporary file as its attempt ends (they only grow: the high-water mark)."""
    from contextlib import contextmanager

    from mds_core.storage import files, remote

    sizes: list[int] = []
    real = files.staged_path  # what remote imported, replaced there: where the download calls it

    @contextmanager
    def recording(path: str, durable: bool = True):
        with real(path, durable) as tmp:
            try:
                yield tmp
            finally:
                sizes.append(os.path.getsize(tmp) if os.path.exists(tmp) else 0)

    monkeypatch.setattr(remote, "staged_path", recording)
    return sizes


@pytest.mark.parametrize("how", ["expected_bytes", "max_bytes"])
def test_a_download_stops_at_its_declared_size(store_url: str, how: str, tmp_path: Path, monkeypatch) -> None:
    store = open_store(store_url)
    store.write_bytes("big.bin", bytes(2 << 20))  # larger than any client's chunk (s3fs 64 KiB, gcsfs 128 KiB)
    sizes = _staged_sizes(monkeypatch)
    why = "expected 1000" if how == "expected_bytes" else "at most 1000 allowed"
    bound: dict[str, Any] = {how: 1000}  # expected_bytes=1000 or max_bytes=1000
    with pytest.raises(StorageError) as caught:
        store.download("big.bin", str(tmp_path / "copy"), **bound)
    message = str(caught.value)
    assert message.startswith(f"download of {store.url_of('big.bin')} failed after 2 attempt(s): Truncated: ")
    assert message.endswith(why), message
    assert len(sizes) == 2 and max(sizes) <= 1001, (sizes, message)  # two attempts, neither wrote past the bound
    assert not (tmp_path / "copy").exists() and _no_temporary_files(tmp_path)
    exact: dict[str, Any] = {how: 2 << 20}
    store.download("big.bin", str(tmp_path / "copy"), **exact)  # exactly the bound is fine
    assert (tmp_path / "copy").stat().st_size == 2 << 20


class _EndlessBody:
    """An HTTP server whose every GET is a 200 with a chunked body of zeros (no Content-Length) of 256 MiB."""

    CHUNK = 64 << 10

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from testsupport.fault_proxy import free_port

        self.sent = 0
        server = self
        data = bytes(self.CHUNK)
        framed = b"%x\r\n" % len(data) + data + b"\r\n"

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.close_connection = True
                try:
                    for _ in range(4096):
                        self.wfile.write(framed)
                        server.sent += len(data)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client hung up: what this test wants

        self.http = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.http.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_body_of_no_announced_length_is_cut_off_mid_stream(scheme: str, tmp_path: Path, monkeypatch) -> None:
    """No Content-Length to refuse up front: the client's progress callback ends the transfer a chunk past the bound."""
    server = _EndlessBody()
    options = {"endpoint_url": server.endpoint}
    if scheme == "s3":
        options.update(key="test", secret="test")
    sizes = _staged_sizes(monkeypatch)
    try:
        store = open_store(f"{scheme}://bucket/data", storage_options=options)
        with pytest.raises(StorageError, match=r"Truncated: got more than 1000 bytes, expected 1000$"):
            store.download("shard.mds", str(tmp_path / "copy"), expected_bytes=1000)
    finally:
        server.stop()
    assert len(sizes) == 2 and max(sizes) <= 1000 + 128 * 1024, sizes  # a client's chunk at most (gcsfs: 128 KiB)
    assert server.sent < 64 << 20, server.sent  # the rest of the 256 MiB body was never read
    assert _no_temporary_files(tmp_path)


def test_mds_verify_of_a_url_downloads_no_more_than_the_index_declares(s3_server, tmp_path: Path, monkeypatch) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url, n=40, compression="zstd")
    store = open_store(url)
    index = json.loads(store.read_bytes("index.json"))
    zip_name = index["shards"][1]["zip_data"]["basename"]
    store.write_bytes(zip_name, bytes(4 << 20))  # replaced by something far larger than its entry says
    result = CliRunner().invoke(cli.main, ["verify", url])
    declared = index["shards"][1]["zip_data"]["bytes"]
    assert result.exit_code == 2, result.output
    assert f"download of {url}/{zip_name} failed" in result.output and f"at most {declared} allowed" in result.output
    store.write_bytes(zip_name, bytes(10))  # a shorter one is copied and reported with its shard
    result = CliRunner().invoke(cli.main, ["verify", url])
    assert result.exit_code == 1 and "FAIL shard 1: " in result.output, result.output
    assert f"10 bytes but the index says {declared} (truncated or replaced)" in result.output

    monkeypatch.setattr("mds_core.cli.common.MAX_INDEX_BYTES", 100)  # an index larger than the cap
    result = CliRunner().invoke(cli.main, ["inspect", url])
    assert result.exit_code == 2 and f"download of {url}/index.json failed" in result.output, result.output
    assert "at most 100 allowed" in result.output
