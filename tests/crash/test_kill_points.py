"""Deterministic crash consistency: kill each operation at every one of its steps, check, retry.

Each operation runs once in a child process to list its steps (``mds_core.storage.kill_points``),
then once per step ``k`` from the same starting state, dying by SIGKILL exactly at step ``k``. After
every kill: (a) the published version reads completely and verifies, (b) nothing half-written is
visible as finished, (c) a rerun or ``vacuum`` leaves no debris, and (d) the operation, retried,
succeeds. The Spark converter's commit has its own test in ``tests/spark``.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from mds_core.format.hashing import get_hash
from mds_core.format.index import INDEX_BASENAME, load_index
from mds_core.storage.remote import open_store
from mds_core.versions import ShardSet
from tests.crash import operations
from tests.crash.checks import check_versions, needed_files, read_ids, uncommitted_transactions
from tests.crash.harness import kill_at, steps_of

OLD, NEW = list(range(30)), list(range(100, 130))  # each a few shards

# The steps each operation below takes, every one of them killed at: docs/remote-storage.md's table, in its
# order (tests/docs/test_figures.py checks that the table quotes these).
KILL_STEPS = {"commit (local)": 21, "commit (s3)": 17, "publish": 4, "vacuum": 10, "upload": 25, "epoch": 38}


def _fresh_root(kind: str, tmp: Path, request: pytest.FixtureRequest, name: str) -> str:
    if kind == "local":
        return str(tmp / name)
    return f"s3://{request.getfixturevalue('s3_server').new_bucket()}/{name}"


def _commit_day(root: str, ids: list[int]) -> None:
    with ShardSet(root).transaction("append") as tx:
        operations.write_rows(tx.out, range(ids[0], ids[-1] + 1))


def _every_step(operation: str, make_args, tmp: Path, check, name: str = "") -> list[str]:
    """List the steps from a fresh start (as many as ``KILL_STEPS[name]``), then kill at each and run
    ``check(args, killed)``."""
    steps = steps_of(operation, make_args("listing"), tmp)
    assert len(steps) == KILL_STEPS[name or operation], steps
    for number in range(1, len(steps) + 1):
        args = make_args(f"k{number}")
        killed = kill_at(operation, args, tmp, number)
        check(args, killed)
    return steps


def _assert_clean(root: str) -> None:
    shard_set = ShardSet(root)
    shard_set.vacuum(grace=dt.timedelta(0))
    assert set(shard_set.store.list()) == needed_files(shard_set)


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.slow)])
def test_a_commit_killed_at_any_step(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    old, new = (OLD, NEW) if kind == "local" else (OLD[:20], NEW[:20])  # fewer steps over HTTP

    def make_args(name: str) -> dict:
        root = _fresh_root(kind, tmp_path, request, name)
        _commit_day(root, old)
        return {"root": root, "ids": [new[0], new[-1] + 1]}

    def check(args: dict, killed) -> None:
        root = args["root"]
        expected = {1: old, 2: old + new}
        assert check_versions(root, tmp_path, expected) in (1, 2), killed
        shard_set = ShardSet(root)
        # (d) Retry as a caller would: a transaction whose shards are all written is committed again
        # (which only publishes it if it was committed already); an unfinished one is written anew.
        finished = [
            tx
            for tx in uncommitted_transactions(shard_set) + [v.transaction for v in shard_set.versions()]
            if shard_set.store.exists(f"data/{tx}/{INDEX_BASENAME}") and tx != shard_set.version(1).transaction
        ]
        if finished:
            shard_set.commit(finished[0], "append")
        else:
            operations.commit(args)
        assert [v.version for v in shard_set.versions()] == [1, 2], killed
        assert shard_set.published() == 2 and read_ids(root, tmp_path) == expected[2], killed
        _assert_clean(root)  # (c)

    steps = _every_step("commit", make_args, tmp_path, check, name=f"commit ({kind})")
    assert any("_versions/00000002.json" in s or "00000002.json" in s for s in steps), steps


def test_a_publish_killed_at_any_step(tmp_path: Path) -> None:
    def make_args(name: str) -> dict:
        root = str(tmp_path / name)
        _commit_day(root, OLD)
        _commit_day(root, NEW)
        return {"root": root, "version": 1}

    def check(args: dict, killed) -> None:
        expected = {1: OLD, 2: OLD + NEW}
        assert check_versions(args["root"], tmp_path, expected) in (1, 2), killed
        operations.publish(args)
        assert check_versions(args["root"], tmp_path, expected) == 1, killed
        _assert_clean(args["root"])

    steps = _every_step("publish", make_args, tmp_path, check)
    assert len(steps) == 4, steps  # two files, each written and then renamed


def test_a_vacuum_killed_at_any_step(tmp_path: Path) -> None:
    days = [list(range(10 * d, 10 * d + 10)) for d in range(4)]

    def make_args(name: str) -> dict:
        root = str(tmp_path / name)
        for day in days:
            _commit_day(root, day)
        # An unfinished transaction, older than any grace period: debris to remove.
        shard_set = ShardSet(root)
        tx = shard_set.transaction("append")
        operations.write_rows(tx.out, range(900, 905))
        for name_ in shard_set.store.list(f"data/{tx.id}"):
            os.utime(os.path.join(root, name_), (time.time() - 86400,) * 2)
        return {"root": root, "keep_last": 2}

    def check(args: dict, killed) -> None:
        expected = {n + 1: sum(days[: n + 1], []) for n in range(4)}
        assert check_versions(args["root"], tmp_path, expected) == 4, killed
        operations.vacuum(args)
        assert [v.version for v in ShardSet(args["root"]).versions()] == [3, 4]
        _assert_clean(args["root"])

    steps = _every_step("vacuum", make_args, tmp_path, check)
    assert sum(s.startswith("deleted") for s in steps) == len(steps) >= 8, steps


@pytest.mark.slow  # every step over HTTP (a minute and a half): make test-all
def test_an_upload_killed_at_any_step(s3_server, tmp_path: Path) -> None:
    new = range(100, 160)

    def make_args(name: str) -> dict:
        out = f"s3://{s3_server.new_bucket()}/{name}"
        operations.write_rows(out, range(20))  # an older, smaller dataset in the same place
        return {"out": out, "ids": [new.start, new.stop]}

    def check(args: dict, killed) -> None:
        store = open_store(args["out"])
        if store.exists(INDEX_BASENAME):  # the old dataset or the new one, whole
            assert read_ids(args["out"], tmp_path) in (list(range(20)), list(new)), killed
        operations.upload(args)
        assert read_ids(args["out"], tmp_path) == list(new)
        named = {
            f.basename for s in load_index(_download_index(store, tmp_path)) for f in (s.raw_data, s.zip_data) if f
        }
        assert set(store.list()) == named | {INDEX_BASENAME}  # (c) the rerun replaced every file

    steps = _every_step("upload", make_args, tmp_path, check)
    assert steps[-1] == "uploaded index.json" and len(steps) >= 5, steps


def _download_index(store, tmp: Path) -> str:
    path = str(tmp / f"index-{time.monotonic_ns()}.json")
    store.download(INDEX_BASENAME, path)
    return path


@pytest.mark.slow  # a StreamingDataset epoch over S3 per step: make test-all
def test_a_cache_killed_at_any_download_or_eviction(s3_server, tmp_path: Path) -> None:
    remote = f"s3://{s3_server.new_bucket()}/data"
    operations.write_rows(remote, range(1600), size_limit=4000)  # shards large beside the index
    index = _download_index(open_store(remote), tmp_path)
    shards = load_index(index)
    limit = 3 * max(s.raw_data.bytes for s in shards) + os.path.getsize(index)  # the cache holds the index too
    assert len(shards) >= 8

    def make_args(name: str) -> dict:
        return {
            "remote": remote,
            "local": str(tmp_path / name),
            "cache_limit": limit,
            "job_root": str(tmp_path / "jobs"),
        }

    def check(args: dict, killed) -> None:
        cache = Path(args["local"])
        for shard in shards:  # (b) a shard under its own name is whole
            path = cache / shard.raw_data.basename
            if path.exists():
                assert get_hash("xxh64", path.read_bytes()) == shard.raw_data.hashes["xxh64"], killed
        leftovers = list(cache.glob("*.tmp"))
        for path in leftovers:  # as if the next run came a while later
            os.utime(path, (time.time() - 3600,) * 2)
        args = {**args, "job_root": str(tmp_path / f"jobs-{killed.number}")}
        assert operations.epoch_ids(args) == list(range(1600))  # (d)
        assert not list(cache.glob("*.tmp")), killed  # (c) the killed download's partial file is gone
        assert sum(p.stat().st_size for p in cache.glob("shard.*")) <= limit

    steps = _every_step("epoch", make_args, tmp_path, check)
    assert sum(s.startswith("evicted") for s in steps) >= 4, steps
    assert sum(s.startswith("renamed into place") for s in steps) >= len(shards), steps
