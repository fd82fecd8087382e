"""Dataset-level checks behind ``mds inspect`` and ``mds verify``.

Verification reads each file at most once for its digests, a chunk at a time, and checks its size
before reading any of it. A compressed shard is decompressed, never past the raw size its index
declares and hashed as it is written, into memory (up to 16 MiB) or a scratch file in ``TMPDIR``
that is then memory-mapped, to check the shard's header, offsets and per-sample column layout. So
neither a 4 GiB shard nor a decompression bomb is ever held in memory, and a bomb costs a chunk of work.
"""

from __future__ import annotations

import io
import mmap
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from mds_core.errors import CompressionError, CorruptShardError, InvalidIndexError, MDSError
from mds_core.format.compression import Codec, get_codec
from mds_core.format.hashing import Hasher, hasher
from mds_core.format.index import INDEX_BASENAME, FileInfo, ShardInfo, load_index
from mds_core.format.shard import Schema, ShardReader

if TYPE_CHECKING:
    from typing_extensions import Buffer

_CHUNK = 1 << 20
_IN_MEMORY_BYTES = 16 << 20  # compressed shards up to this raw size are decompressed into memory (see _scratch)


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
        """Raw bytes per compressed byte, or None when nothing is compressed."""
        return self.raw_bytes / self.zip_bytes if self.zip_bytes else None

    def to_json(self) -> dict[str, Any]:
        """The summary as a dict, the ratio included."""
        return {**self.__dict__, "ratio": self.ratio}


@dataclass
class Report:
    """The outcome of ``verify_dataset``: problems name the shard and file."""

    root: str
    shards: int = 0
    files_checked: int = 0
    hashes_checked: int = 0
    samples_checked: int = 0
    samples_not_decoded: int = 0  # with ``decode``: the samples of pkl shards, unless unsafe types are allowed
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems


def summarize(root: str) -> Summary:
    """Shards, samples, columns and bytes of the dataset at ``root``, from its index."""
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
    schema = Schema(shard.column_names, shard.column_encodings)
    with _raw_file(root, shard, raw_path, report) as file:
        # The reader owns the map and closes it (decoded values are copies, never views of it).
        reader = ShardReader(_map(file), raw_path, schema, shard.samples, shard.raw_data.bytes)
    try:
        reader.check_samples()
        if decode and (allow_unsafe or "pkl" not in shard.column_encodings):
            for index in range(shard.samples):
                reader[index]
        elif decode:  # pkl values would run unpickling: counted, so the report does not claim them decoded
            report.samples_not_decoded += shard.samples
    finally:
        reader.close()
    report.samples_checked += shard.samples


@contextmanager
def _raw_file(root: str, shard: ShardInfo, raw_path: str, report: Report) -> Iterator[IO[bytes]]:
    """The raw shard as an open file, once its files' sizes and digests are checked.

    Where there is a zip (readers use it), decompressed from it into scratch space (see ``_scratch``), else the raw file
    itself.
    """
    zip_path = None if shard.zip_data is None else os.path.join(root, shard.zip_data.basename)
    if shard.zip_data is not None and zip_path is not None and os.path.exists(zip_path):
        codec = get_codec(shard.compression)
        if codec is None:  # load_index refuses this; a ShardInfo made by hand may not
            raise InvalidIndexError(f"{shard.zip_data.basename}: 'zip_data' without a 'compression'")
        with _scratch(shard.raw_data.bytes) as scratch:
            with _opened(zip_path) as zipped:
                _check_file(zipped, zip_path, shard.zip_data, report)
                _decompress_checked(codec, zipped, zip_path, scratch, raw_path, shard.raw_data, report)
            if os.path.exists(raw_path):  # a reader's decompressed copy: readers use it instead of the zip
                with _opened(raw_path) as raw:
                    _check_file(raw, raw_path, shard.raw_data, report)
            yield scratch
    elif os.path.exists(raw_path) or zip_path is None:
        with _opened(raw_path) as raw:
            _check_file(raw, raw_path, shard.raw_data, report)
            yield raw
    else:
        raise MDSError(f"{zip_path}: compressed shard file is missing")


def _scratch(size: int) -> IO[bytes]:
    """Where a shard declared ``size`` bytes raw is decompressed: never more than that is written to it.

    Up to ``_IN_MEMORY_BYTES``, memory; above, an unnamed file in ``TMPDIR`` (O_TMPFILE, gone when
    closed), memory-mapped afterwards, so even a 4 GiB shard costs a few chunks of memory. Small
    shards skip the file because creating one costs more than checking them (~0.3 ms on overlayfs).
    """
    return io.BytesIO() if size <= _IN_MEMORY_BYTES else tempfile.TemporaryFile(prefix="mds-verify-")


def _opened(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as err:
        raise MDSError(f"{path}: cannot read ({err.strerror})") from err


def _map(file: IO[bytes]) -> mmap.mmap | bytes:
    """A read-only map of ``file`` (``b""`` for an empty one, which mmap refuses: the layout check reports it)."""
    if isinstance(file, io.BytesIO):
        return file.getvalue()  # bytes, read-only: CPython hands over its buffer rather than copy it
    file.flush()
    if os.fstat(file.fileno()).st_size == 0:
        return b""
    return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _check_file(file: IO[bytes], path: str, info: FileInfo, report: Report) -> None:
    """The size of ``path`` (before reading anything) and its digests (a chunk at a time) against ``info``."""
    report.files_checked += 1
    try:
        _check_size(path, os.fstat(file.fileno()).st_size, info)
        if not info.hashes:  # the size is all there is to check
            return
        digests = _Digests(path, info)
        while chunk := file.read(min(_CHUNK, info.bytes + 1 - digests.size)):  # never past a byte too many
            digests.write(chunk)
    except OSError as err:
        raise MDSError(f"{path}: cannot read ({err.strerror})") from err
    digests.check(report)


def _decompress_checked(
    codec: Codec, zipped: IO[bytes], zip_path: str, scratch: IO[bytes], raw_path: str, info: FileInfo, report: Report
) -> None:
    """Decompress ``zipped`` into ``scratch``, no further than ``info.bytes``, hashing on the way."""
    report.files_checked += 1
    digests = _Digests(raw_path + " (decompressed)", info, scratch)
    try:
        zipped.seek(0)
        codec.decompress_file(zipped, digests, info.bytes)
    except CompressionError as err:
        raise CorruptShardError(f"{zip_path}: {err}") from err
    except OSError as err:
        raise MDSError(f"{zip_path}: cannot decompress it into a scratch file ({err}); is TMPDIR full?") from err
    digests.check(report)


class _Digests:
    """A writer that hashes what passes through it with every algorithm ``info`` records (and may copy it on)."""

    def __init__(self, label: str, info: FileInfo, copy_to: IO[bytes] | None = None) -> None:
        self.label, self.info, self.size, self._copy_to = label, info, 0, copy_to
        self._hashers: list[tuple[str, Hasher]] = [(algo, hasher(algo)()) for algo in sorted(info.hashes)]

    def write(self, data: Buffer) -> int:
        view = memoryview(data)
        for _, digest in self._hashers:
            digest.update(view)
        self.size += view.nbytes
        if self._copy_to is not None:
            self._copy_to.write(view)
        return view.nbytes

    def check(self, report: Report) -> None:
        _check_size(self.label, self.size, self.info)
        for algo, digest in self._hashers:
            actual, expected = digest.hexdigest(), self.info.hashes[algo]
            if actual != expected:
                raise MDSError(f"{self.label}: {algo} digest {actual} does not match the index's {expected}")
            report.hashes_checked += 1


def _check_size(label: str, size: int, info: FileInfo) -> None:
    if size != info.bytes:
        raise MDSError(f"{label}: {size} bytes but the index says {info.bytes} (truncated or replaced)")
