"""The remote matrix, on S3, Google Cloud Storage, Azure Blob and Databricks volumes.

moto (``s3://``, testsupport/s3.py), fake-gcs-server (``gs://``, gcsfs) and Azurite (``az://``, adlfs) run as
processes on 127.0.0.1 (testsupport/emulators.py), the Databricks Files API (``dbfs:/Volumes/...``, the
Databricks SDK) in a thread (testsupport/databricks_files.py); nothing is mocked. Request counts and faults come
from ``testsupport.fault_proxy.FaultProxy`` between the clients and the server, reached through the same
environment variables that ranks and DataLoader workers inherit.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from mds_core.errors import StorageError
from mds_core.storage.first_byte import DEADLINE_ENV
from mds_core.storage.remote import open_store
from mds_core.versions import ShardSet
from tests.crash.operations import write_rows
from tests.storage.test_create_exclusive import one_winner, race_threads
from tests.storage.test_remote import (
    SERVERS,
    _dataset,
    _ids,
    _no_temporary_files,
    _write,
    read_by_two_ranks_of_two_workers,
)
from tests.versions.conftest import commit_or_conflict
from testsupport.fault_proxy import fault_proxy_for


@pytest.fixture(params=sorted(SERVERS))
def server(request):
    return request.getfixturevalue(SERVERS[request.param])


# moto checks `If-None-Match: *` and then writes, with no lock between (moto/s3/responses.py), so two racing
# creates can both win there, where S3 itself serialises them: the races run on the emulators that do too.
RACING = sorted(set(SERVERS) - {"s3"})


@pytest.fixture(params=RACING)
def racing_server(request):
    return request.getfixturevalue(SERVERS[request.param])


@pytest.fixture
def proxy(server):
    """A FaultProxy in front of the emulator; the clients' environment points at it meanwhile."""
    with fault_proxy_for(server) as proxy:
        yield proxy


def test_write_then_stream_every_sample_back(server, tmp_path: Path) -> None:
    url = f"{server.new_root()}/data"
    samples = _write(url, compression="zstd", hashes=["sha1", "xxh64"])
    keys = open_store(url).list()
    assert keys[0] == "index.json" and all(k.endswith(".mds.zstd") for k in keys[1:]) and len(keys) > 5
    got = {int(s["id"]): s["payload"] for s in _dataset(url, tmp_path, validate_hash="sha1")}
    assert got == {s["id"]: s["payload"] for s in samples}
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_file())
    assert cached == sorted(["index.json", *(k[: -len(".zstd")] for k in keys[1:])])  # keep_zip=False
    assert _no_temporary_files(tmp_path / "cache")


def test_two_ranks_two_workers_fetch_each_file_once_per_node(server, proxy, tmp_path: Path, monkeypatch) -> None:
    # On a loaded machine a loopback answer can pass the 1-s first-byte deadline and be asked for again
    # (tests/storage/test_throttled_store.py tests that); here each file must be sent for once.
    monkeypatch.setenv(DEADLINE_ENV, "off")
    root = server.new_root()
    url = f"{root}/data"
    _write(url, n=400)
    shard_keys = [k for k in open_store(url).list() if k != "index.json"]
    proxy.requests.clear()
    read_by_two_ranks_of_two_workers(url, tmp_path)  # the ranks reach the emulator through the proxy
    assert server.object_gets(proxy.requests, root) == {f"data/{key}": 1 for key in ["index.json", *shard_keys]}


def test_uploads_and_downloads_survive_dropped_failing_and_truncated_responses(server, proxy, tmp_path: Path) -> None:
    url = f"{server.new_root()}/data"
    uploads = [
        proxy.add(server.upload_fault("status", r"shard\.00001\.mds", value=503)),
        proxy.add(server.upload_fault("drop", r"shard\.00002\.mds")),
        proxy.add(server.upload_fault("lose", r"shard\.00003\.mds")),
    ]
    samples = _write(url, n=300, retry=3, keep_local=False)
    assert all(f.hits == 1 for f in uploads)
    expected = _ids(_dataset(url, tmp_path, "clean", shuffle=True))
    downloads = [
        proxy.add(server.download_fault(action, rf"shard\.0000{i}\.mds", value=value))
        for i, (action, value) in enumerate(
            [("drop", 0), ("status", 503), ("status", 500), ("truncate", 1000), ("delay", 0.5)]
        )
    ]
    dataset = _dataset(url, tmp_path, shuffle=True, download_retry=3)
    got = list(dataset)
    assert [int(s["id"]) for s in got] == expected and sorted(expected) == list(range(300))
    assert {int(s["id"]): s["payload"] for s in got} == {s["id"]: s["payload"] for s in samples}
    assert all(f.hits == 1 for f in downloads)
    assert _no_temporary_files(tmp_path / "cache")


def test_retry_counts_every_attempt_the_client_makes(server, proxy, tmp_path: Path) -> None:
    """The client libraries' own retries are off: ``download_retry=2`` is two requests, then a StorageError."""
    url = f"{server.new_root()}/data"
    _write(url, n=100)
    fault = proxy.add(server.download_fault("status", r"shard\.00002\.mds", value=503, times=10))
    with pytest.raises(StorageError, match=rf"download of {url}/shard.00002.mds failed after 2 attempt\(s\)"):
        _ids(_dataset(url, tmp_path, download_retry=2))
    assert fault.hits == 2
    assert not (tmp_path / "cache" / "shard.00002.mds").exists() and _no_temporary_files(tmp_path / "cache")


def test_download_timeout_is_a_deadline_per_file(server, proxy, tmp_path: Path) -> None:
    url = f"{server.new_root()}/data"
    _write(url, n=100)
    # The margins are wide: on a busy 2-core machine the undelayed index.json can take over a second.
    proxy.add(server.download_fault("delay", r"shard\.00000\.mds", value=10, times=5))
    dataset = _dataset(url, tmp_path, download_retry=1, download_timeout=4)
    with pytest.raises(StorageError, match=r"shard.00000.mds failed after 1 attempt\(s\): .*within the 4 s timeout"):
        _ids(dataset)
    assert _no_temporary_files(tmp_path / "cache")


# ------------------------------------------------------------------------------------------------
# exclusive create: version commits


def test_racing_conditional_creates_have_exactly_one_winner(racing_server) -> None:
    store = open_store(f"{racing_server.new_root()}/race")
    for name in ("a", "b", "c"):
        winner = one_winner(store.write_if_absent, name)
        assert store.read_bytes(name) == f"writer {winner}".encode()


def test_concurrent_commits_have_one_winner_per_version_and_the_losers_commit_later(
    racing_server, tmp_path: Path
) -> None:
    root = f"{racing_server.new_root()}/set"
    shard_set = ShardSet(root)
    with shard_set.transaction("overwrite") as first:
        write_rows(first.out, range(5))
    transactions = [shard_set.transaction("append") for _ in range(6)]
    for n, tx in enumerate(transactions):
        write_rows(tx.out, _rows_of(n))
    outcomes = race_threads([partial(commit_or_conflict, shard_set, tx.id) for tx in transactions])
    assert sorted(outcomes, key=str) == [2] + ["conflict"] * 5
    losers = [n for n, outcome in enumerate(outcomes) if outcome == "conflict"]
    for version, n in enumerate(losers, start=3):  # nothing of theirs was lost: each commits on top of the latest
        assert shard_set.commit(transactions[n].id, "append").version == version
    assert [v.version for v in shard_set.versions()] == list(range(1, 8))
    order = [outcomes.index(2), *losers]
    expected = list(range(5)) + [i for n in order for i in _rows_of(n)]
    assert _ids(_dataset(root, tmp_path, version=7)) == expected


def _rows_of(n: int) -> range:
    """The rows of the ``n``-th racing transaction."""
    return range(100 * (n + 1), 100 * (n + 1) + 5)


def test_a_lost_reply_to_the_winning_create_still_wins(server, proxy, tmp_path: Path) -> None:
    """The manifest was created but its reply never came: the retry finds its own bytes and wins."""
    root = f"{server.new_root()}/set"
    shard_set = ShardSet(root)
    with shard_set.transaction("overwrite") as tx:
        write_rows(tx.out, range(10))
    fault = proxy.add(server.upload_fault("lose", r"_versions/00000002\.json"))
    with shard_set.transaction("append") as tx:
        write_rows(tx.out, range(10, 20))
    assert fault.hits == 1 and tx.version is not None and tx.version.version == 2
    assert _ids(_dataset(root, tmp_path)) == list(range(20))


def test_reading_a_dataset_sends_one_get_per_file_and_nothing_else(
    server, proxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "off")  # a loaded machine's late loopback answer would be asked for again
    root = server.new_root()
    url = f"{root}/data"
    _write(url, n=200, compression="zstd")
    files = open_store(url).list()
    proxy.requests.clear()
    assert sorted(_ids(_dataset(url, tmp_path, shuffle=True))) == list(range(200))
    # no metadata lookups, listings or HEADs: the index gives every size (gcsfs's own download asks for
    # an object's metadata and lists its "directory" first)
    assert server.object_gets(proxy.requests, root) == {f"data/{key}": 1 for key in files}
    # (the Databricks SDK reads the host's configuration once per client, not per file)
    requests = [r for r in proxy.requests if not r[1].startswith("/.well-known/")]
    assert len(requests) == len(files), requests
