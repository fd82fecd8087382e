"""Dataset-level checks behind ``mds inspect`` and ``mds verify``.

Verification reads every file once: it checks sizes and every recorded digest, decompresses in
memory, and checks each shard's header, offsets and per-sample column layout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mds_core.errors import InvalidIndexError, MDSError
from mds_core.format.compression import get_codec
from mds_core.format.hashing import get_hash
from mds_core.format.index import INDEX_BASENAME, FileInfo, ShardInfo, load_index
from mds_core.format.shard import Schema, ShardReader


@dataclass
class Summary:
    """What ``mds inspect`` prints."""

    root: str
    columns: dict[str, str]
    shards: int
    samples: int
    raw_bytes: int
    zip_bytes: int | None
    compression: list[str]
    hashes: list[str]

    @property
    def ratio(self) -> float | None:
        return self.raw_bytes / self.zip_bytes if self.zip_bytes else None

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ratio": self.ratio}


@dataclass
class Report:
    """The outcome of ``verify_dataset``: problems name the shard and file."""

    root: str
    shards: int = 0
    files_checked: int = 0
    hashes_checked: int = 0
    samples_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def summarize(root: str) -> Summary:
    shards = load_index(os.path.join(root, INDEX_BASENAME))
    columns: dict[str, str] = {}
    for shard in shards:
        columns.update(zip(shard.column_names, shard.column_encodings))
    zipped = [s.zip_data.bytes for s in shards if s.zip_data]
    return Summary(
        root=root,
        columns=columns,
        shards=len(shards),
        samples=sum(s.samples for s in shards),
        raw_bytes=sum(s.raw_data.bytes for s in shards),
        zip_bytes=sum(zipped) if zipped else None,
        compression=sorted({s.compression for s in shards if s.compression}),
        hashes=sorted({h for s in shards for h in s.hashes}),
    )


def verify_dataset(root: str, decode: bool = False, allow_unsafe_types: bool = False) -> Report:
    """Check the index, every file's size and digests, and every shard's layout (and values if ``decode``)."""
    report = Report(root)
    try:
        shards = load_index(os.path.join(root, INDEX_BASENAME))
    except MDSError as err:
        report.problems.append(str(err))
        return report
    report.shards = len(shards)
    for shard_id, shard in enumerate(shards):
        try:
            _verify_shard(root, shard, report, decode, allow_unsafe_types)
        except MDSError as err:
            report.problems.append(f"shard {shard_id}: {err}")
    return report


def _verify_shard(root: str, shard: ShardInfo, report: Report, decode: bool, allow_unsafe: bool) -> None:
    raw_path = os.path.join(root, shard.raw_data.basename)
    if shard.zip_data is not None and os.path.exists(os.path.join(root, shard.zip_data.basename)):
        codec = get_codec(shard.compression)
        if codec is None:  # load_index refuses this; a ShardInfo made by hand may not
            raise InvalidIndexError(f"{shard.zip_data.basename}: 'zip_data' without a 'compression'")
        data = _checked_file(root, shard.zip_data, report)
        raw = codec.decompress(data)
        _check_digests(raw_path + " (decompressed)", raw, shard.raw_data, report)
        if os.path.exists(raw_path):  # a reader's decompressed copy: readers use it instead of the zip
            _checked_file(root, shard.raw_data, report)
    elif os.path.exists(raw_path) or shard.zip_data is None:
        raw = _checked_file(root, shard.raw_data, report)
    else:
        raise MDSError(f"{os.path.join(root, shard.zip_data.basename)}: compressed shard file is missing")
    schema = Schema(shard.column_names, shard.column_encodings)
    reader = ShardReader(raw, raw_path, schema, shard.samples, shard.raw_data.bytes)
    reader.check_samples()
    if decode and (allow_unsafe or "pkl" not in shard.column_encodings):
        for index in range(shard.samples):
            reader[index]
    report.samples_checked += shard.samples


def _checked_file(root: str, info: FileInfo, report: Report) -> bytes:
    path = os.path.join(root, info.basename)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as err:
        raise MDSError(f"{path}: cannot read ({err.strerror})") from err
    _check_digests(path, data, info, report)
    return data


def _check_digests(path: str, data: bytes, info: FileInfo, report: Report) -> None:
    report.files_checked += 1
    if len(data) != info.bytes:
        raise MDSError(f"{path}: {len(data)} bytes but the index says {info.bytes} (truncated or replaced)")
    for algo, expected in sorted(info.hashes.items()):
        actual = get_hash(algo, data)
        if actual != expected:
            raise MDSError(f"{path}: {algo} digest {actual} does not match the index's {expected}")
        report.hashes_checked += 1
