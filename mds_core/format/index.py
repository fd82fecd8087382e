"""The ``index.json`` model: parse and validate strictly, serialise byte-for-byte like the reference.

A dataset index is ``{"shards": [...], "version": 2}``; each shard entry has exactly the eleven keys
the reference's reader accepts (an extra or missing key makes it fail, so we refuse them too).
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, cast

from mds_core.errors import InvalidIndexError, MergeError, UnsafePathError
from mds_core.format.shard import MAX_SHARD_BYTES

INDEX_BASENAME = "index.json"
READER_CACHE = ".mds-cache"  # a reader's locks and ledger, inside a cached stream's folder
INDEX_VERSION = 2
SHARD_KEYS = frozenset(
    {
        "column_encodings",
        "column_names",
        "column_sizes",
        "compression",
        "format",
        "hashes",
        "raw_data",
        "samples",
        "size_limit",
        "version",
        "zip_data",
    }
)
FILE_KEYS = frozenset({"basename", "bytes", "hashes"})
# A shard file is ``u32 N``, ``u32 offsets[N + 1]``, then its config and samples, and its last offset is its size:
# so it is at least ``4 * (N + 2)`` bytes and at most MAX_SHARD_BYTES (2**32 - 1), which bounds N by 2**30 - 3.
# Larger counts come from a damaged index, and would overflow ``len()`` and the int64 arrays readers build.
MAX_SHARD_SAMPLES = MAX_SHARD_BYTES // 4 - 2
# A compressed shard has no offsets to bound it, but no codec here expands data by more than a fraction
# (snappy's worst case, 32 + n + n/6, is the largest): twice the largest raw shard is out of reach.
MAX_ZIP_BYTES = 2 * MAX_SHARD_BYTES
# Nothing in a dataset declares its index's size, so a download of it is capped instead: a million
# shard entries take about 0.5 GB of JSON, and a store (or a link to one) serving more is refused
# before it fills the disk.
MAX_INDEX_BYTES = 1 << 30


def get_index_basename() -> str:
    """``index.json``, as the reference's function of this name returns."""
    return INDEX_BASENAME


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file of a shard: its path relative to the dataset root, size and digests."""

    basename: str
    bytes: int
    hashes: dict[str, str] = field(default_factory=dict)

    def __reduce__(self) -> tuple[type[FileInfo], tuple[str, int, dict[str, str]]]:
        """Pickled as its constructor's arguments: faster than a dataclass's state (see ``_compacted``)."""
        return FileInfo, (self.basename, self.bytes, self.hashes)

    def to_json(self) -> dict[str, Any]:
        """The file's entry as ``index.json`` writes it."""
        return {"basename": self.basename, "bytes": self.bytes, "hashes": dict(self.hashes)}


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One entry of ``index.json["shards"]`` for the MDS format."""

    column_encodings: list[str]
    column_names: list[str]
    column_sizes: list[int | None]
    compression: str | None
    hashes: list[str]
    raw_data: FileInfo
    samples: int
    size_limit: int | None
    zip_data: FileInfo | None

    @classmethod
    def from_config(
        cls, config: dict[str, Any], raw_data: FileInfo, samples: int, zip_data: FileInfo | None
    ) -> ShardInfo:
        """An entry for a shard written with a writer's ``get_config()``."""
        keys = ("column_encodings", "column_names", "column_sizes", "compression", "hashes", "size_limit")
        return cls(**{key: config[key] for key in keys}, raw_data=raw_data, samples=samples, zip_data=zip_data)

    def __reduce__(self) -> tuple[type[ShardInfo], tuple[Any, ...]]:
        """Pickled as its constructor's arguments: faster than a dataclass's state (see ``_compacted``)."""
        return ShardInfo, tuple(getattr(self, name) for name in self.__slots__)

    @property
    def files(self) -> list[FileInfo]:
        """The shard's files: the raw one, and the compressed one if any."""
        return [self.raw_data] + ([self.zip_data] if self.zip_data else [])

    def with_prefix(self, prefix: str) -> ShardInfo:
        """The same shard seen from a parent directory: basenames gain ``prefix/``."""

        def moved(info: FileInfo) -> FileInfo:
            return replace(info, basename=f"{prefix}/{info.basename}")

        zip_data = None if self.zip_data is None else moved(self.zip_data)
        return replace(self, raw_data=moved(self.raw_data), zip_data=zip_data)

    def to_json(self) -> dict[str, Any]:
        """The shard's entry as ``index.json`` writes it."""
        # Keys in sorted order, so even an unsorted json.dump matches the reference's merge output.
        return {
            "column_encodings": list(self.column_encodings),
            "column_names": list(self.column_names),
            "column_sizes": list(self.column_sizes),
            "compression": self.compression,
            "format": "mds",
            "hashes": list(self.hashes),
            "raw_data": self.raw_data.to_json(),
            "samples": self.samples,
            "size_limit": self.size_limit,
            "version": INDEX_VERSION,
            "zip_data": self.zip_data.to_json() if self.zip_data else None,
        }


def check_same_columns(shards: list[ShardInfo], what: str, fix: str = "") -> None:
    """Raise ``MergeError`` unless every shard has the same column names and encodings."""
    found = list(dict.fromkeys((tuple(s.column_names), tuple(s.column_encodings)) for s in shards))
    if len(found) > 1:
        described = "; ".join("{" + ", ".join(f"{n}: {e}" for n, e in zip(*columns)) + "}" for columns in found)
        raise MergeError(
            f"{what} have different columns and cannot be combined into one dataset: {described}"
            + (f". {fix}" if fix else "")
        )


def dumps_index(shards: list[ShardInfo]) -> str:
    """``index.json`` text exactly as the reference writer produces it (sorted keys, no newline)."""
    return json.dumps({"shards": [s.to_json() for s in shards], "version": INDEX_VERSION}, sort_keys=True)


def dumps_merged_index(shards: list[ShardInfo]) -> str:
    """``index.json`` text exactly as the reference's ``merge_index`` produces it (unsorted top level)."""
    return json.dumps({"version": INDEX_VERSION, "shards": [s.to_json() for s in shards]})


def load_index(path: str | os.PathLike[str], source: str | None = None) -> list[ShardInfo]:
    """Read and validate an ``index.json`` file.

    ``source`` names it in error messages (default ``path``): the remote file that ``path`` is a copy of, say, the one
    to repair.
    """
    where = str(path) if source is None else source
    try:
        with open(path, "rb") as file:
            text = file.read()
    except FileNotFoundError as err:
        raise InvalidIndexError(f"{where}: no index.json here; is this an MDS dataset directory?") from err
    return parse_index(text, where)


def parse_index(text: str | bytes, where: str = INDEX_BASENAME) -> list[ShardInfo]:
    """Validate index JSON text; ``where`` names the file in error messages."""
    return _compacted(_parse_shards(text, where))


def _parse_shards(text: str | bytes, where: str) -> list[ShardInfo]:
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:  # RecursionError: absurdly deep nesting
        raise InvalidIndexError(f"{where}: not valid JSON ({err}); rewrite the dataset or restore the file") from err
    if not isinstance(obj, dict) or set(obj) != {"shards", "version"}:
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise InvalidIndexError(f"{where}: expected an object with keys ['shards', 'version'], got {keys}")
    if obj["version"] != INDEX_VERSION:
        raise InvalidIndexError(f"{where}: index version {obj['version']!r} is not supported (only {INDEX_VERSION})")
    if not isinstance(obj["shards"], list):
        raise InvalidIndexError(f"{where}: 'shards' must be a list")
    common: dict[tuple[Any, ...], Any] = {}
    return [parse_shard(entry, f"{where}: shard {i}", common) for i, entry in enumerate(obj["shards"])]


def _compacted(shards: list[ShardInfo]) -> list[ShardInfo]:
    """The same shards, made anew once the parsed JSON is freed, so that they sit together in memory.

    Made while parsing, they lie scattered between the JSON's freed objects and keep all of Python's memory arenas
    of it: 16 MiB at 10**4 shards, in each rank and (as their pages are touched) in each DataLoader worker. Copied
    after, they fill 6 arenas and the other 10 go back to the system. (A pickle of our own objects, made and read
    here.)
    """
    packed = pickle.dumps(shards, pickle.HIGHEST_PROTOCOL)
    shards.clear()
    return cast(list[ShardInfo], pickle.loads(packed))


def parse_shard(entry: Any, where: str, common: dict[tuple[Any, ...], Any]) -> ShardInfo:
    """Validate one shard entry; ``where`` names the index file and shard number.

    ``common`` keeps one copy of the lists and digests that the entries of one index repeat (see ``_one_copy``).
    """
    if not isinstance(entry, dict):
        raise InvalidIndexError(f"{where}: a shard entry must be an object, got {type(entry).__name__}")
    missing, extra = SHARD_KEYS - set(entry), set(entry) - SHARD_KEYS
    if missing or extra:
        raise InvalidIndexError(f"{where}: missing keys {sorted(missing)}, unexpected keys {sorted(extra)}")
    if entry["format"] != "mds":
        raise InvalidIndexError(f"{where}: format {entry['format']!r} is not supported (only 'mds')")
    if entry["version"] != INDEX_VERSION:
        raise InvalidIndexError(f"{where}: shard version {entry['version']!r} is not supported")
    names = _one_copy(common, _string_list(entry, "column_names", where))
    encodings = _one_copy(common, _string_list(entry, "column_encodings", where))
    sizes = entry["column_sizes"]
    if not isinstance(sizes, list) or not all(s is None or _is_count(s) for s in sizes):
        raise InvalidIndexError(f"{where}: 'column_sizes' must be a list of non-negative ints or nulls")
    if not len(names) == len(encodings) == len(sizes):
        raise InvalidIndexError(f"{where}: column_names, column_encodings and column_sizes differ in length")
    if len(set(names)) != len(names):
        raise InvalidIndexError(f"{where}: duplicate column names {names}")
    if not _is_count(entry["samples"]):
        raise InvalidIndexError(f"{where}: 'samples' must be a non-negative int, got {entry['samples']!r}")
    if entry["size_limit"] is not None and not _is_count(entry["size_limit"]):
        raise InvalidIndexError(f"{where}: 'size_limit' must be a non-negative int or null")
    if entry["compression"] is not None and not isinstance(entry["compression"], str):
        raise InvalidIndexError(f"{where}: 'compression' must be a string or null")
    raw_data = _file_info(entry["raw_data"], f"{where} raw_data", MAX_SHARD_BYTES, common)
    zip_data = entry["zip_data"]
    zip_data = None if zip_data is None else _file_info(zip_data, f"{where} zip_data", MAX_ZIP_BYTES, common)
    if (zip_data is None) != (not entry["compression"]):
        raise InvalidIndexError(f"{where}: 'zip_data' must be present exactly when 'compression' is set")
    if zip_data is not None and PurePosixPath(zip_data.basename) == PurePosixPath(raw_data.basename):
        raise UnsafePathError(f"{where}: raw_data and zip_data name the same file, {raw_data.basename!r}")
    _check_samples_fit(entry["samples"], raw_data.bytes, where)
    return ShardInfo(
        column_encodings=encodings,
        column_names=names,
        column_sizes=_one_copy(common, sizes),
        compression=entry["compression"],
        hashes=_one_copy(common, _string_list(entry, "hashes", where)),
        raw_data=raw_data,
        samples=entry["samples"],
        size_limit=entry["size_limit"],
        zip_data=zip_data,
    )


def check_basename(basename: Any, where: str) -> str:
    """A basename is a relative path to a file that stays inside the dataset directory.

    Not the dataset's own ``index.json``, nor a file of a reader's cache (``.mds-cache/``): a shard
    written or evicted there would replace or remove them.
    """
    if not isinstance(basename, str) or not basename:
        raise InvalidIndexError(f"{where}: 'basename' must be a non-empty string")
    path = PurePosixPath(basename)
    parts = path.parts
    if (
        not parts
        or path.is_absolute()
        or ".." in parts
        or "\\" in basename
        or "\0" in basename
        or ":" in parts[0]
        or basename.endswith("/")
    ):
        raise UnsafePathError(f"{where}: basename {basename!r} must be a relative path inside the dataset, to a file")
    if parts == (INDEX_BASENAME,) or parts[0] == READER_CACHE:
        raise UnsafePathError(f"{where}: basename {basename!r} names the dataset's index or a reader's cache files")
    return basename


def _check_samples_fit(samples: int, raw_bytes: int, where: str) -> None:
    """Refuse a sample count whose header alone (``4 * (samples + 2)`` bytes) would not fit in the shard file."""
    if samples > MAX_SHARD_SAMPLES:
        raise InvalidIndexError(
            f"{where}: 'samples' is {samples:,} but a shard holds at most {MAX_SHARD_SAMPLES:,} samples "
            "(its offsets are 4 bytes, so the file is under 4 GiB); the index is damaged"
        )
    if 4 * (samples + 2) > raw_bytes:
        raise InvalidIndexError(
            f"{where}: 'samples' is {samples:,} but the header of {samples:,} samples takes {4 * (samples + 2):,} "
            f"bytes, more than the {raw_bytes:,} bytes of the shard file (raw_data.bytes); the index is damaged"
        )


def _file_info(obj: Any, where: str, max_bytes: int, common: dict[tuple[Any, ...], Any]) -> FileInfo:
    if not isinstance(obj, dict) or set(obj) != FILE_KEYS:
        raise InvalidIndexError(f"{where}: must be an object with keys {sorted(FILE_KEYS)}")
    if not _is_count(obj["bytes"]):
        raise InvalidIndexError(f"{where}: 'bytes' must be a non-negative int, got {obj['bytes']!r}")
    if obj["bytes"] > max_bytes:
        raise InvalidIndexError(f"{where}: 'bytes' is {obj['bytes']:,}, more than a shard file can be ({max_bytes:,})")
    hashes = obj["hashes"]
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise InvalidIndexError(f"{where}: 'hashes' must map algorithm names to hex digests")
    return FileInfo(check_basename(obj["basename"], where), obj["bytes"], _one_copy(common, dict(hashes)))


def _one_copy(common: dict[tuple[Any, ...], Any], value: Any) -> Any:
    """``value``, or an equal one (in the same order) that ``common`` already keeps.

    The shards of one dataset repeat the same columns, sizes and digest names: one copy of each instead of one per
    shard (7 MiB of objects at 10**4 shards). Nothing changes a parsed index in place.
    """
    key = (type(value), *(value.items() if isinstance(value, dict) else value))
    return common.setdefault(key, value)


def _string_list(entry: dict[str, Any], key: str, where: str) -> list[str]:
    value = entry[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidIndexError(f"{where}: {key!r} must be a list of strings")
    return value


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
