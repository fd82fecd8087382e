"""What a shard set records about each version: its manifest, and the names of the files on the store.

The layout of a shard-set root::

    index.json                             the published version's index: plain MDS readers read it
    data/<txn>/...                         shards, each written once by one transaction, never changed
    _versions/00000003.<txn>.index.json    version 3's complete index (basenames relative to the root)
    _versions/00000003.json                version 3's manifest, the commit marker, written last
    _versions/published.json               {"version": N, "fingerprint": ..., "history": [...]}: which version
                                           index.json is, and the ones published before it (oldest first)
    _versions/head.json                    {"version": N}: a hint where the newest version is (may be stale)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypedDict

from mds_core.errors import ConfigurationError, InvalidIndexError, InvalidManifestError
from mds_core.format.index import ShardInfo, check_basename

VERSIONS = "_versions"
DATA = "data"
PUBLISHED = f"{VERSIONS}/published.json"
HEAD = f"{VERSIONS}/head.json"
MODES = ("append", "overwrite", "replace")
HISTORY_LIMIT = 50  # publications remembered for rollback(): years of daily runs need no more than a few
# A partition key names a folder on every store, so it stays within portable file-name characters.
PARTITION_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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
    partitions: dict[str, list[str]] = field(default_factory=dict)  # key -> its shards' basenames

    @property
    def number(self) -> int:
        """The version's number."""
        return self.version

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON, without ``partitions`` for a set that has none."""
        obj = asdict(self)
        if not self.partitions:  # a set without partitions writes what older readers parse
            del obj["partitions"]
        return obj


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
        """The diff as JSON."""
        return asdict(self)


@dataclass(frozen=True)
class VacuumReport:
    """What a vacuum kept and removed."""

    kept_versions: list[int]
    removed_versions: list[int]
    removed_files: list[str]

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        return asdict(self)


def index_fingerprint(index_text: bytes) -> str:
    """A version's fingerprint: the start of its index's SHA-256."""
    return hashlib.sha256(index_text).hexdigest()[:16]


def manifest_name(number: int) -> str:
    """The manifest's path for version ``number``: ``_versions/<8 digits>.json``."""
    return f"{VERSIONS}/{number:08d}.json"


# A version number as it appears in a file name: ASCII digits, few enough for an int64. isdecimal() also
# accepts other scripts' digits and 5,000-digit strings, on which int() fails or raises ValueError.
VERSION_DIGITS = re.compile(r"[0-9]{1,18}")


def is_version_number(text: str) -> bool:
    """Whether ``text`` is a version number as a file name spells it."""
    return VERSION_DIGITS.fullmatch(text) is not None


def is_manifest(name: str) -> bool:
    """Whether ``name`` is the path of a version's manifest."""
    base = posixpath.basename(name)
    return name.startswith(f"{VERSIONS}/") and base.endswith(".json") and is_version_number(base[:-5])


# The JSON type of each manifest field (bool is excluded from int: JSON true is not a count).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "version": (int,),
    "parent": (int, type(None)),
    "created": (str,),
    "mode": (str,),
    "transaction": (str,),
    "index": (str,),
    "rows": (int,),
    "shards": (int,),
    "raw_bytes": (int,),
    "stored_bytes": (int,),
    "new_shards": (int,),
    "columns": (dict,),
    "fingerprint": (str,),
    "writer": (dict,),
    "lineage": (dict,),
    "partitions": (dict,),
}
_REQUIRED = {f.name for f in fields(VersionInfo) if f.default is MISSING and f.default_factory is MISSING}


def _json_object(data: bytes, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidManifestError(f"{where}: not valid JSON ({err}); the shard set's metadata is damaged") from err
    if not isinstance(obj, dict):
        raise InvalidManifestError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def parse_manifest(data: bytes, where: str, number: int | None = None) -> VersionInfo:
    """Validate a manifest's JSON (of version ``number``, if known); ``where`` names the file in errors.

    Every field is checked, because later steps read, list and delete the files a manifest names.
    """
    obj = _json_object(data, where)
    missing, extra = _REQUIRED - set(obj), set(obj) - set(_FIELD_TYPES)
    if missing or extra:
        raise InvalidManifestError(f"{where}: missing keys {sorted(missing)}, unexpected keys {sorted(extra)}")
    for key, value in obj.items():
        if not _has_type(value, _FIELD_TYPES[key]):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in _FIELD_TYPES[key])
            raise InvalidManifestError(f"{where}: {key!r} must be {names}, got {value!r}")
    if number is not None and obj["version"] != number:
        raise InvalidManifestError(f"{where}: records version {obj['version']} but is the manifest of version {number}")
    check_basename(obj["index"], f"{where}: 'index'")
    check_partitions(obj.get("partitions", {}), where)
    return VersionInfo(**obj)


def check_partition_key(key: Any, where: str) -> str:
    """``key``, refused unless it is a string that may name a folder; ``where`` names the caller."""
    if not isinstance(key, str) or not PARTITION_KEY.fullmatch(key):
        raise ConfigurationError(
            f"{where}: partition key {key!r} must match {PARTITION_KEY.pattern} (it names a folder on the store)"
        )
    return key


def check_partitions(partitions: dict[str, Any], where: str) -> None:
    """``{key: [shard basename, ...]}``: vacuum and replace act on these names, so each must be safe."""
    for key, names in partitions.items():
        try:
            check_partition_key(key, where)
            if not isinstance(names, list):
                raise InvalidManifestError(f"{where}: partition {key!r} must list shard basenames, got {names!r}")
            for name in names:
                check_basename(name, f"{where}: partition {key!r}")
        except (ConfigurationError, InvalidIndexError) as err:
            raise InvalidManifestError(str(err)) from None


class Published(TypedDict):
    """``published.json``: the published version, its index's fingerprint, the ones published before."""

    version: int
    fingerprint: str
    history: list[int]  # oldest first


def parse_published(data: bytes, where: str) -> Published:
    """Validate ``published.json``: ``{"version": int, "fingerprint": str, "history": [int, ...]}``.

    ``history`` (the versions published before, oldest first) is absent from files older than it.
    """
    obj = _json_object(data, where)
    history = obj.get("history", [])
    if (
        not _has_type(obj.get("version"), (int,))
        or not _has_type(obj.get("fingerprint"), (str,))
        or not isinstance(history, list)
        or not all(_has_type(n, (int,)) and n >= 1 for n in history)
    ):
        raise InvalidManifestError(
            f'{where}: expected {{"version": <int>, "fingerprint": <str>, "history": [<int>, ...]}}, got {obj!r}'
        )
    return Published(version=obj["version"], fingerprint=obj["fingerprint"], history=history)


def now() -> dt.datetime:
    """The time now, in UTC."""
    return dt.datetime.now(dt.UTC)


def created_before(info: VersionInfo, when: dt.datetime) -> bool:
    """Whether ``info`` was created before ``when`` (a ``created`` that does not parse counts as before)."""
    try:
        created = dt.datetime.fromisoformat(info.created)
    except ValueError:
        return True
    return (created if created.tzinfo else created.replace(tzinfo=dt.UTC)) < when


def describe(
    number: int,
    parent: VersionInfo | None,
    mode: str,
    transaction: str,
    index_name: str,
    shards: list[ShardInfo],
    new: int,
    index_text: bytes,
    lineage: dict[str, Any],
    partitions: dict[str, list[str]] | None = None,
) -> VersionInfo:
    """The manifest of a new version built on ``parent``."""
    first = shards[0]
    return VersionInfo(
        version=number,
        parent=parent.version if parent else None,
        created=now().isoformat(),
        mode=mode,
        transaction=transaction,
        index=index_name,
        rows=sum(s.samples for s in shards),
        shards=len(shards),
        raw_bytes=sum(s.raw_data.bytes for s in shards),
        stored_bytes=sum((s.zip_data or s.raw_data).bytes for s in shards),
        new_shards=new,
        columns=dict(zip(first.column_names, first.column_encodings)),
        fingerprint=index_fingerprint(index_text),
        writer={"compression": first.compression, "hashes": first.hashes, "size_limit": first.size_limit},
        lineage=lineage,
        partitions=partitions or {},
    )
