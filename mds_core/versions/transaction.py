"""``Transaction``: a version being written, committed when its ``with`` block ends without an error.

A transaction knows nothing of the shard set it writes to: ``ShardSet.transaction`` resolves the base
version and hands it the numbers, the store to write under and the function that commits.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from mds_core.storage.remote import RemoteStore
from mds_core.versions.manifest import DATA, VersionInfo, now
from mds_core.versions.numbering import STAMP_FORMAT
from mds_core.versions.partitions import partition_folder


class Commit(Protocol):
    """Commits what transaction ``transaction`` wrote as a new version (``ShardSet.commit`` is one)."""

    def __call__(
        self,
        transaction: str,
        mode: str,
        lineage: dict[str, Any],
        publish: bool,
        *,
        parent: int | None,
        seen: int | None,
        partitions: list[str],
    ) -> VersionInfo:
        """Commit the transaction's new version; return its manifest."""


class Transaction:
    """A version being written: shards go to ``out`` or to partitions; leaving the ``with`` block commits them.

    ``parent`` is the version this writer builds on and ``seen`` the newest when it started (the
    commit becomes ``seen + 1``); None for none. ``commit`` is called with both on a clean exit.
    """

    def __init__(
        self,
        store: RemoteStore,
        commit: Commit,
        mode: str,
        lineage: dict[str, Any],
        publish: bool,
        *,
        parent: int | None,
        seen: int | None,
    ) -> None:
        self.store, self._commit = store, commit
        self.mode, self.lineage, self.publish = mode, lineage, publish
        self.parent, self.seen = parent, seen
        stamp = now().strftime(STAMP_FORMAT)
        self.id = f"{stamp}-{uuid.uuid4().hex[:8]}"
        self.out = store.address_of(f"{DATA}/{self.id}")
        self.partitions: list[str] = []
        self.version: VersionInfo | None = None

    def partition_out(self, key: str) -> str:
        """The folder (path or URL) to write partition ``key`` to, as a complete MDS dataset.

        At the commit, a ``replace`` drops the base version's shards of every key written here and an
        ``append`` refuses keys the base has already.
        """
        folder = partition_folder(self.id, key)
        if key not in self.partitions:
            self.partitions.append(key)
        return self.store.address_of(folder)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None:
            self.version = self._commit(
                self.id,
                self.mode,
                self.lineage,
                self.publish,
                parent=self.parent,
                seen=self.seen,
                partitions=list(self.partitions),
            )
        # On an exception nothing is committed; the partial files are debris for vacuum().
