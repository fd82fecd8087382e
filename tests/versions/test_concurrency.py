"""Many writers committing at once: exactly one winner per version number, and every loser's data
committable later. Threads share a process; processes race through the store alone. Local disks
(hard link) and S3 (conditional PUT on the loopback server) both give an exclusive create."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.storage.exclusive import ExclusiveCreateUnsupported
from mds_core.versions import ShardSet
from tests.crash.operations import write_rows
from tests.storage.test_create_exclusive import race_threads
from tests.versions.conftest import commit_or_conflict

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 8
# Says "ready" once imported and with its store open, then commits when the parent says "go" on stdin.
_COMMIT_ON_GO = """
import json, sys
from mds_core.versions import ShardSet
from tests.versions.conftest import commit_or_conflict
shard_set = ShardSet(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
print(json.dumps(commit_or_conflict(shard_set, sys.argv[2], publish=False)))
"""


def _prepare(root: str) -> tuple[ShardSet, list[str]]:
    """Version 1, then WRITERS transactions written from it, each with its own rows."""
    shard_set = ShardSet(root)
    with shard_set.transaction("append") as tx:
        write_rows(tx.out, range(10))
    transactions = []
    for n in range(WRITERS):
        tx = shard_set.transaction("append")
        write_rows(tx.out, range(100 * (n + 1), 100 * (n + 1) + 10))
        transactions.append(tx.id)
    return shard_set, transactions


def _in_threads(shard_set: ShardSet, transactions: list[str]) -> list[object]:
    return race_threads([partial(commit_or_conflict, shard_set, tx, publish=False) for tx in transactions])


def _in_processes(shard_set: ShardSet, transactions: list[str]) -> list[object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COMMIT_ON_GO, shard_set.store.url, tx],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tx in transactions
    ]
    for proc in procs:  # a start barrier: every process has imported and opened its store
        ready = proc.stdout.readline() if proc.stdout else ""
        assert ready == "ready\n", proc.communicate(timeout=60)[1][-2000:]
    for proc in procs:
        if proc.stdin:
            proc.stdin.write("go\n")
            proc.stdin.flush()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        outcomes.append(json.loads(out))
    return outcomes


# Processes (17 s: each imports the library) in the slow tier; threads race the same store calls in make test.
PROCESSES = pytest.param(_in_processes, id="processes", marks=pytest.mark.slow)


@pytest.mark.parametrize("race", [pytest.param(_in_threads, id="threads"), PROCESSES])
def test_many_committers_one_winner_and_every_loser_commits_later(root: str, race, tmp_path: Path) -> None:
    shard_set, transactions = _prepare(root)
    outcomes = race(shard_set, transactions)
    assert sorted(outcomes, key=str) == [2] + ["conflict"] * (WRITERS - 1)
    # Each loser commits again on top of whatever is latest: nothing it wrote was lost.
    for transaction in transactions:
        shard_set.commit(transaction, "append")  # the winner's is already committed: published only
    versions = shard_set.versions()
    assert [v.version for v in versions] == list(range(1, WRITERS + 2))
    assert sorted(v.transaction for v in versions[1:]) == sorted(transactions)  # each exactly once
    dataset = StreamingDataset(
        remote=root, local=str(tmp_path / "read"), batch_size=1, shuffle=False, job_root=str(tmp_path / "jobs")
    )
    expected = list(range(10)) + [i for n in range(WRITERS) for i in range(100 * (n + 1), 100 * (n + 1) + 10)]
    assert sorted(int(s["id"]) for s in dataset) == expected


def test_a_store_without_an_exclusive_create_is_refused_before_anything_is_written(s3_server, monkeypatch) -> None:
    # Every store tested here has an exclusive create; hf:// has none, but huggingface_hub is not in the dev
    # environment. So S3 stands in, its registry entry without an exclusive create.
    from mds_core.storage import stores

    without = dataclasses.replace(stores.STORES["s3"], exclusive_create=None)
    monkeypatch.setattr(stores, "STORES", {**stores.STORES, "s3": without})
    root = f"s3://{s3_server.new_bucket()}/set"
    shard_set = ShardSet(root)
    message = (
        rf"{root}: s3:// cannot create a file exclusively, so two writers committing at once could both "
        r"succeed\. Keep versioned shard sets on a store that can \(.*dbfs://.*gs://"
    )
    with pytest.raises(ExclusiveCreateUnsupported, match=message):
        shard_set.transaction("append")
    with pytest.raises(ExclusiveCreateUnsupported, match=message):
        shard_set.commit("20260101T000000-abcdef12", "append")
    assert shard_set.store.list() == []
