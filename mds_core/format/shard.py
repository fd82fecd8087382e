"""The MDS shard layout: build shard bytes, and read samples from a memory-mapped shard file.

A shard is ``u32 N``, ``u32 offsets[N+1]`` (absolute positions; the last equals the file size),
the config JSON, then the samples. A sample is ``u32 size`` for each variable-size column followed
by every column's bytes, in sorted column order.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mds_core.errors import CorruptShardError, EncodeError, MDSError, MissingColumnError
from mds_core.format.encodings import Coder, get_coder
from mds_core.format.rows import rows_of

MAX_SHARD_BYTES = (1 << 32) - 1  # offsets are u32, and the last offset is the file size
BLOCK_BYTES = 1 << 20  # in-order reading reads and decodes about this much at a time
# Fewer samples of one shard than this are decoded one at a time: a column-wise decode costs 50-100 µs whatever
# its size (numpy calls on tiny arrays), one sample 2-6 µs. A shuffled block of 256 samples over a hundred shards
# has 2-3 samples in each (measured crossover: 16-32 samples, for 1 and 5 columns).
MIN_TAKE_BLOCK = 24
_U32 = np.dtype("<u4")
_LITTLE_ENDIAN = sys.byteorder == "little"
_Plan = list[tuple[str, Callable[[Any, int, int], Any], int, int]]


@dataclass(frozen=True)
class Column:
    """One column: its name, its coder and its fixed size (None when values vary)."""

    name: str
    coder: Coder
    size: int | None


class Schema:
    """Columns in on-disk (sorted) order, with coders built once for every sample."""

    def __init__(self, names: list[str], encodings: list[str]) -> None:
        self.names, self.encodings = list(names), list(encodings)
        self.columns = [Column(n, get_coder(e), get_coder(e).size) for n, e in zip(names, encodings)]
        self.num_var = sum(c.size is None for c in self.columns)
        self.fixed_bytes = sum(c.size or 0 for c in self.columns)
        self._var_sizes = struct.Struct(f"<{self.num_var}I")
        # (name, decode, fixed size, index into the variable sizes or -1 for a fixed-size column); the
        # view plan decodes arrays as views of the buffer (read-only where it is) instead of copies.
        self._plan: _Plan = []
        self._view_plan: _Plan = []
        var = 0
        for col in self.columns:
            fixed, var_index = col.size or 0, var if col.size is None else -1
            self._plan.append((col.name, col.coder.decode, fixed, var_index))
            self._view_plan.append((col.name, getattr(col.coder, "view", col.coder.decode), fixed, var_index))
            var += col.size is None
        self._var_columns = [i for i, c in enumerate(self.columns) if c.size is None]
        self._fixed_columns = [i for i, c in enumerate(self.columns) if c.size is not None]
        self._fixed_sizes = [c.size for c in self.columns if c.size is not None]
        self._encode_plan = [(c.name, c.coder.encode, c.size, e) for c, e in zip(self.columns, self.encodings)]
        self._rows = rows_of(self.names) if self.names else None
        self._fixed_starts = np.cumsum(self._fixed_sizes, dtype=np.int64) - self._fixed_sizes  # with no var column

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from names and encodings: struct.Struct objects cannot be pickled.
        return Schema, (self.names, self.encodings)

    @classmethod
    def from_columns(cls, columns: dict[str, str]) -> Schema:
        """The schema of ``{name: encoding}``, columns in name order as the reference stores them."""
        names = sorted(columns)
        return cls(names, [columns[name] for name in names])

    def encode(self, sample: Any) -> bytes:
        """One sample's bytes. ``bytes`` values pass through unchanged, as in the reference."""
        return b"".join(self.encode_parts(sample))

    def encode_parts(self, sample: Any) -> list[bytes]:
        """One sample as a list of byte strings, so callers can write them without joining."""
        sizes, parts = [], []
        for name, encode, fixed, encoding in self._encode_plan:
            try:
                value = sample[name]
            except KeyError:
                raise MissingColumnError(f"sample is missing column {name!r}; it has {sorted(sample)}") from None
            except TypeError:
                raise EncodeError(f"a sample must be a dict of column values, got {type(sample).__name__}") from None
            try:
                data = value if isinstance(value, bytes) else encode(value)
            except EncodeError as err:
                raise EncodeError(f"column {name!r} ({encoding}): {err}") from err
            if fixed is None:
                sizes.append(len(data))
            elif len(data) != fixed:
                raise EncodeError(f"column {name!r} ({encoding}) takes {fixed} bytes, got {len(data)}")
            parts.append(data)
        if sizes:
            parts.insert(0, self._var_sizes.pack(*sizes))
        return parts

    def decode(self, buf: Any, begin: int, end: int, writable: bool = True) -> dict[str, Any]:
        """Decode the sample stored in ``buf[begin:end]``, never reading outside that range.

        Arrays are writable (copies where ``buf`` is read-only) unless ``writable`` is False: then they view ``buf``.
        """
        pos = begin + 4 * self.num_var
        if pos > end:
            raise CorruptShardError(f"sample is {end - begin} bytes, shorter than its size table")
        sizes = self._var_sizes.unpack_from(buf, begin)
        if pos + self.fixed_bytes + sum(sizes) != end:
            raise CorruptShardError(
                f"sample is {end - begin} bytes but its columns add up to "
                f"{4 * self.num_var + self.fixed_bytes + sum(sizes)}"
            )
        out = {}
        try:
            for name, decode, fixed, var in self._plan if writable else self._view_plan:
                size = fixed if var < 0 else sizes[var]
                out[name] = decode(buf, pos, size)
                pos += size
        except MDSError as err:
            raise type(err)(f"column {name!r}: {err}") from err
        return out

    def column_layout(
        self, u8: np.ndarray, begins: np.ndarray, ends: np.ndarray, first: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start and size of every column of every sample in ``[begins, ends)``, shape (samples, columns).

        Vectorised over the samples; raises ``CorruptShardError`` naming the first sample (numbered
        from ``first``) whose column sizes do not add up to its length.
        """
        head, lengths, problem = 4 * self.num_var, ends - begins, "has column sizes that do not add up to its length"
        if not head:  # every column fixed: the same layout in every sample
            _first_bad(lengths != self.fixed_bytes, first, problem)
            sizes = np.broadcast_to(np.asarray(self._fixed_sizes, np.int64), (len(begins), len(self.columns)))
            return begins[:, None] + self._fixed_starts, sizes
        _first_bad(lengths < head, first, "is shorter than its size table")
        sizes = np.empty((len(begins), len(self.columns)), np.int64)
        table = u8[begins[:, None] + np.arange(head)]  # (samples, 4 * num_var) bytes
        sizes[:, self._var_columns] = table.view(_U32)
        sizes[:, self._fixed_columns] = self._fixed_sizes
        _first_bad(head + sizes.sum(axis=1) != lengths, first, problem)
        starts = begins[:, None] + head + np.cumsum(sizes, axis=1) - sizes
        return starts, sizes

    def decode_block(
        self, buf: Any, u8: np.ndarray, begins: np.ndarray, ends: np.ndarray, writable: bool = True
    ) -> list[dict[str, Any]]:
        """Decode many samples column by column: numbers in one numpy gather, other values in a comprehension.

        ``u8`` is ``buf`` as a uint8 array. Arrays view ``buf`` when it is writable (a block the
        caller owns and hands over) or when ``writable`` is False; from a read-only (shared) buffer
        they are otherwise copies.
        """
        plan = self._plan if writable else self._view_plan
        starts, sizes = self.column_layout(u8, begins, ends)
        columns: list[Any] = []
        for j, column in enumerate(self.columns):
            coder = column.coder
            if hasattr(coder, "decode_many"):
                columns.append(coder.decode_many(u8, starts[:, j]))
            elif hasattr(coder, "decode_views") and coder.size is not None:  # sizes checked above
                columns.append(coder.decode_views(u8, starts[:, j], writable))
            elif hasattr(coder, "decode_spans"):
                columns.append(coder.decode_spans(buf, starts[:, j].tolist(), (starts[:, j] + sizes[:, j]).tolist()))
            else:
                decode = plan[j][1]
                columns.append([decode(buf, a, n) for a, n in zip(starts[:, j].tolist(), sizes[:, j].tolist())])
        return self._rows(*columns) if self._rows else [{} for _ in range(len(begins))]


def _first_bad(mask: np.ndarray, first: int, problem: str) -> None:
    if mask.any():
        raise CorruptShardError(f"sample {first + int(np.argmax(mask))} {problem}")


def shard_head(sample_sizes: list[int], header: bytes) -> bytes:
    """The sample count, offset table and config header that precede a shard's samples."""
    start = 4 * (len(sample_sizes) + 2) + len(header)
    offsets = np.empty(len(sample_sizes) + 1, np.int64)
    offsets[0] = start
    np.cumsum(np.asarray(sample_sizes, np.int64), out=offsets[1:])
    offsets[1:] += start
    if offsets[-1] > MAX_SHARD_BYTES:
        raise MDSError(f"shard of {offsets[-1]} bytes passes the 4 GiB limit of MDS offsets")
    return struct.pack("<I", len(sample_sizes)) + offsets.astype(_U32).tobytes() + header


def build_shard(samples: list[bytes], header: bytes) -> bytes:
    """The bytes of one shard file holding ``samples`` (already encoded) after ``header``."""
    return shard_head([len(sample) for sample in samples], header) + b"".join(samples)


@dataclass(frozen=True)
class Block:
    """Samples ``[start, stop)`` of a shard, stored in its bytes ``[begin, end)``."""

    start: int
    stop: int
    begin: int
    end: int


class ShardReader:
    """Random access to the samples of one raw shard held in a buffer (usually a read-only mmap).

    The buffer is read-only (an ``ACCESS_READ`` map, ``bytes``; a writable one is viewed read-only):
    decoded arrays are copies, writable and the caller's, and a write into one never reaches the
    shard or a later read. With ``writable=False``, random access (``reader[i]``) and ``take`` return
    read-only views of the buffer instead, which costs no copy, for a caller that never writes.

    The header and offset table are validated once at open, so per-sample reads need no checks
    beyond the column layout, and a corrupt or truncated file fails before any sample is decoded.
    """

    def __init__(
        self,
        buf: Any,
        path: str,
        schema: Schema,
        num_samples: int,
        expected_bytes: int | None = None,
        writable: bool = True,
    ) -> None:
        self.path = path
        self.schema = schema
        self.num_samples = num_samples
        self.writable = writable
        self._mm = _read_only(buf)
        self._offsets32: np.ndarray | None = None  # the header's offsets as numpy: a view, made on first use
        self._u8: np.ndarray | None = None
        try:
            self._offsets = self._check_layout(expected_bytes)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(
        cls, path: str, schema: Schema, num_samples: int, expected_bytes: int | None = None, writable: bool = True
    ) -> ShardReader:
        """Memory-map the shard file at ``path``."""
        return cls(_map_file(path), path, schema, num_samples, expected_bytes, writable)

    def _check_layout(self, expected_bytes: int | None) -> Any:
        size, n = len(self._mm), self.num_samples
        if expected_bytes is not None and size != expected_bytes:
            raise CorruptShardError(
                f"{self.path}: {size} bytes but the index says {expected_bytes}; the shard is truncated "
                "or was overwritten: re-download or rewrite it"
            )
        if size < 4 * (n + 2) or size < 4:
            raise CorruptShardError(f"{self.path}: {size} bytes is too short for the header of {n} samples")
        (stored,) = struct.unpack_from("<I", self._mm, 0)
        if stored != n:
            raise CorruptShardError(f"{self.path}: header holds {stored} samples but the index says {n}")
        offsets = np.frombuffer(self._mm, _U32, n + 1, 4)
        if offsets[0] < 4 * (n + 2) or offsets[-1] != size or np.any(offsets[1:] < offsets[:-1]):
            raise CorruptShardError(
                f"{self.path}: sample offsets are out of range or decreasing (first {offsets[0]}, "
                f"last {offsets[-1]}, file {size} bytes)"
            )
        # A memoryview cast reads u32s as Python ints faster than numpy indexing does.
        return memoryview(self._mm)[4 : 4 * (n + 2)].cast("I") if _LITTLE_ENDIAN else offsets.tolist()

    def __getitem__(self, index: int) -> dict[str, Any]:
        offsets = self._offsets
        try:
            return self.schema.decode(self._mm, offsets[index], offsets[index + 1], self.writable)
        except MDSError as err:
            raise type(err)(f"{self.path}: sample {index}: {err}") from err

    def _offsets_array(self) -> np.ndarray:
        """The header's sample offsets, a view of the map; callers widen what they gather.

        A whole int64 copy per open shard cost 8 bytes a sample in each process that read it: 0.8 GB in a
        worker that reads every shard of 10⁸ samples.
        """
        if self._offsets32 is None:
            self._offsets32 = np.frombuffer(self._mm, _U32, self.num_samples + 1, 4)
        return self._offsets32

    def take(self, indices: np.ndarray) -> list[dict[str, Any]]:
        """The samples at many ``indices`` of this shard (any order), decoded column by column.

        From ``MIN_TAKE_BLOCK`` samples on, 1-4 µs per sample cheaper than one ``self[index]`` each, which
        smaller groups get; a corrupt sample falls back to ``self[index]``, whose error names the exact
        sample and column.
        """
        if len(indices) < MIN_TAKE_BLOCK:
            return [self[index] for index in indices.tolist()]
        offsets = self._offsets_array()
        if self._u8 is None:
            self._u8 = np.frombuffer(self._mm, np.uint8)
        try:
            begins, ends = offsets[indices].astype(np.int64), offsets[indices + 1].astype(np.int64)
            return self.schema.decode_block(self._mm, self._u8, begins, ends, self.writable)
        except MDSError:
            return [self[index] for index in indices.tolist()]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """All samples in order, read and decoded about ``BLOCK_BYTES`` at a time.

        In-order reading copies blocks with ``pread`` rather than touching the memory map: the
        kernel's copy costs less CPU than mapping every page of a large file (measured on a cold
        dataset larger than RAM: 964-974 vs 885-916 MB/s on one core). A read-ahead thread made it
        slower: its blocks came from a fresh malloc arena, whose pages the kernel then had to zero.
        """
        blocks = self._blocks()
        if not isinstance(self._mm, mmap.mmap):  # a shard held in memory (e.g. ``mds verify``'s)
            for block in blocks:
                data = np.frombuffer(self._mm, np.uint8, block.end - block.begin, block.begin).copy()
                yield from self._decode_block_bytes(block, data)
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for block in blocks:
                # Into a new array of our own, not the bytes os.pread returns: its arrays are then
                # writable views (torch warns on read-only ones), and a write reaches only that sample.
                data = np.empty(block.end - block.begin, np.uint8)
                if os.preadv(fd, [data.data], block.begin) != len(data):
                    raise CorruptShardError(
                        f"{self.path}: shrank while being read (wanted bytes {block.begin}-{block.end})"
                    )
                yield from self._decode_block_bytes(block, data)
        finally:
            os.close(fd)

    def _blocks(self) -> list[Block]:
        """The shard cut into runs of whole samples of about ``BLOCK_BYTES``."""
        if not self.num_samples:
            return []
        offsets = self._offsets_array()
        rows = max(16, min(4096, BLOCK_BYTES * self.num_samples // max(1, len(self._mm))))
        return [
            Block(
                start,
                min(start + rows, self.num_samples),
                int(offsets[start]),
                int(offsets[min(start + rows, self.num_samples)]),
            )
            for start in range(0, self.num_samples, rows)
        ]

    def _decode_block_bytes(self, block: Block, data: np.ndarray) -> list[dict[str, Any]]:
        """The samples of ``block`` from its bytes, a writable array no one else holds: arrays view it."""
        offsets = self._offsets_array()
        try:
            return self.schema.decode_block(
                data.data,  # a memoryview of the array's bytes
                data,
                offsets[block.start : block.stop].astype(np.int64) - block.begin,
                offsets[block.start + 1 : block.stop + 1].astype(np.int64) - block.begin,
            )
        except MDSError:
            return [self[index] for index in range(block.start, block.stop)]  # names the exact sample and column

    def check_samples(self) -> None:
        """Check every sample's column layout without decoding values."""
        offsets = self._offsets_array().astype(np.int64)
        try:
            self.schema.column_layout(np.frombuffer(self._mm, np.uint8), offsets[:-1], offsets[1:])
        except CorruptShardError as err:
            raise CorruptShardError(f"{self.path}: {err}") from err

    def close(self) -> None:
        """Release the shard's file map and views."""
        self._offsets32 = self._u8 = None  # numpy views of the map would keep it open
        offsets = getattr(self, "_offsets", None)
        if isinstance(offsets, memoryview):
            offsets.release()
        try:
            if isinstance(self._mm, mmap.mmap):
                self._mm.close()
        except BufferError:
            pass  # zero-copy arrays still view the map; it closes when they are collected


def _read_only(buf: Any) -> Any:
    """``buf``, or a read-only view of it if it is writable: decoded arrays must copy, not view, it."""
    with memoryview(buf) as view:
        writable = not view.readonly
    return memoryview(buf).toreadonly() if writable else buf


def _map_file(path: str) -> mmap.mmap | bytes:
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return b""  # mmap refuses empty files; the layout check reports it
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
