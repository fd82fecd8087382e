"""What a shard set records about each version: its manifest, and the names of the files on the store.

The layout of a shard-set root::

    index.json                             the published version's index: plain MDS readers read it
    data/<txn>/...                         shards, each written once by one transaction, never changed
    _versions/00000003.<txn>.index.json    version 3's complete index (basenames relative to the root)
    _versions/00000003.json                version 3's manifest, the commit marker, written last
    _versions/published.json               {"version": N, "fingerprint": ...}: which version index.json is
"""

from __future__ import annotations

import datetime as dt
import hashlib
import posixpath
from dataclasses import asdict, dataclass, field
from typing import Any

from mds_core.format.index import ShardInfo

VERSIONS = "_versions"
DATA = "data"
PUBLISHED = f"{VERSIONS}/published.json"
MODES = ("append", "overwrite")


@dataclass(frozen=True)
class VersionInfo:
    """One committed version, as its manifest records it."""

    version: int
    parent: int | None
    created: str  # ISO 8601, UTC
    mode: str
    transaction: str
    index: str  # the version's index file, relative to the root
    rows: int
    shards: int
    raw_bytes: int
    stored_bytes: int  # what the files take in the store (compressed where compressed)
    new_shards: int
    columns: dict[str, str]
    fingerprint: str
    writer: dict[str, Any]
    lineage: dict[str, Any] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return self.version

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VersionDiff:
    """What changed from version ``old`` to version ``new``."""

    old: int
    new: int
    added_shards: list[str]
    removed_shards: list[str]
    added_rows: int
    removed_rows: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VacuumReport:
    kept_versions: list[int]
    removed_versions: list[int]
    removed_files: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def index_fingerprint(index_text: bytes) -> str:
    """A version's fingerprint: the start of its index's SHA-256."""
    return hashlib.sha256(index_text).hexdigest()[:16]


def manifest_name(number: int) -> str:
    return f"{VERSIONS}/{number:08d}.json"


def is_manifest(name: str) -> bool:
    base = posixpath.basename(name)
    return name.startswith(f"{VERSIONS}/") and base.endswith(".json") and base[:-5].isdigit()


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def describe(number: int, parent: VersionInfo | None, mode: str, transaction: str, index_name: str,
              shards: list[ShardInfo], new: int, index_text: bytes, lineage: dict[str, Any]) -> VersionInfo:
    first = shards[0]
    return VersionInfo(
        version=number, parent=parent.version if parent else None, created=now().isoformat(), mode=mode,
        transaction=transaction, index=index_name, rows=sum(s.samples for s in shards), shards=len(shards),
        raw_bytes=sum(s.raw_data.bytes for s in shards),
        stored_bytes=sum((s.zip_data or s.raw_data).bytes for s in shards), new_shards=new,
        columns=dict(zip(first.column_names, first.column_encodings)),
        fingerprint=index_fingerprint(index_text),
        writer={"compression": first.compression, "hashes": first.hashes, "size_limit": first.size_limit},
        lineage=lineage,
    )
