"""``Transaction``: a version being written, committed when its ``with`` block ends without an error."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from mds_core.versions.head import tip
from mds_core.versions.manifest import DATA, VersionInfo, now
from mds_core.versions.numbering import STAMP_FORMAT
from mds_core.versions.partitions import partition_folder

if TYPE_CHECKING:
    from mds_core.versions.shard_set import ShardSet


class Transaction:
    """A version being written: shards go to ``out`` or to partitions; leaving the ``with`` block commits them."""

    def __init__(
        self, shard_set: ShardSet, mode: str, lineage: dict[str, Any], publish: bool, base: int | str | None = "latest"
    ) -> None:
        self.shard_set, self.mode, self.lineage, self.publish = shard_set, mode, lineage, publish
        stamp = now().strftime(STAMP_FORMAT)
        self.id = f"{stamp}-{uuid.uuid4().hex[:8]}"
        self.out = shard_set.store.address_of(f"{DATA}/{self.id}")
        found, _ = tip(shard_set.store)
        self.seen = found[-1].version if found else None  # the newest now: this commits as seen + 1
        parent = shard_set._resolve(base, found)
        self.parent = parent.version if parent is not None else None  # what this writer builds on
        self.partitions: list[str] = []
        self.version: VersionInfo | None = None

    def partition_out(self, key: str) -> str:
        """The folder (path or URL) to write partition ``key`` to, as a complete MDS dataset.

        At the commit, a ``replace`` drops the base version's shards of every key written here and an
        ``append`` refuses keys the base has already."""
        folder = partition_folder(self.id, key)
        if key not in self.partitions:
            self.partitions.append(key)
        return self.shard_set.store.address_of(folder)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None:
            self.version = self.shard_set.commit(
                self.id,
                self.mode,
                self.lineage,
                self.publish,
                parent=self.parent,
                seen=self.seen,
                partitions=list(self.partitions),
            )
        # On an exception nothing is committed; the partial files are debris for vacuum().
