"""A shard-set root on local disk and on the loopback S3 server, a small day writer, a reader, and a store
whose writes of one file fail, for the version tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import pytest

from mds_core import MDSWriter, StreamingDataset
from mds_core.errors import StorageError, VersionConflictError
from mds_core.storage.remote import RemoteStore
from mds_core.versions import ShardSet
from mds_core.versions.manifest import VersionInfo

COLUMNS = {"id": "int", "day": "str"}


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "set")
    return f"s3://{request.getfixturevalue('s3_server').new_bucket()}/set"


def write_day(out: str, day: str, ids: range) -> None:
    """An MDS dataset of one day's rows in small shards (1 KiB), so a day spans several."""
    with MDSWriter(out=out, columns=COLUMNS, size_limit=1024) as writer:
        for i in ids:
            writer.write({"id": i, "day": day})


def commit(shard_set: ShardSet, mode: str, day: str, ids: range, **kwargs: Any) -> VersionInfo:
    """One transaction of ``day``'s rows at ``tx.out``, with ``{"day": day}`` as its lineage; its version."""
    with shard_set.transaction(mode, lineage={"day": day}, **kwargs) as tx:
        write_day(tx.out, day, ids)
    assert tx.version is not None  # committed
    return tx.version


def commit_or_conflict(shard_set: ShardSet, transaction: str, **kwargs: Any) -> int | str:
    """``transaction`` committed as an append on version 1: its version's number, or "conflict" if another won."""
    try:
        return shard_set.commit(transaction, "append", parent=1, **kwargs).version
    except VersionConflictError:
        return "conflict"


def read_ids(root: str, tmp_path: Path, version: int | None = None) -> list[int]:
    """The ids of ``version`` (None: the published one) in order, through a cache of their own."""
    cache = tmp_path / f"cache-{version}-{time.monotonic_ns()}"
    dataset = StreamingDataset(
        remote=root, local=str(cache), version=version, batch_size=4, job_root=str(tmp_path / "jobs")
    )
    return [int(sample["id"]) for sample in dataset]


class RefusesToWrite:
    """A store on which every write of a file whose name ends with ``suffix`` fails: a process dying
    there, or a write refused for good. Everything else goes to the real store."""

    def __init__(self, store, suffix: str, message: str) -> None:
        self._store, self._suffix, self._message = store, suffix, message

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def write_bytes(self, rel: str, data: bytes) -> None:
        if rel.endswith(self._suffix):
            raise StorageError(self._message)
        self._store.write_bytes(rel, data)


def refusing_to_write(store: RemoteStore, suffix: str, message: str) -> RemoteStore:
    """``store`` behind a :class:`RefusesToWrite`, typed as the store it stands in for (it forwards the rest)."""
    return cast(RemoteStore, RefusesToWrite(store, suffix, message))
