"""``LocalDataset``: random access and in-order iteration over a local MDS directory.

It is the layer ``StreamingDataset`` stands on: a list of shards from ``index.json``, a mapping
from global sample index to (shard, index in shard), and one lazily-opened ``ShardReader`` per shard.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any, overload

import numpy as np

from mds_core.errors import (
    CorruptShardError,
    EpochMemoryError,
    InvalidIndexError,
    SampleIndexError,
    UnknownEncodingError,
    UnsafeEncodingError,
)
from mds_core.format.encodings import is_mds_encoding_safe
from mds_core.format.index import INDEX_BASENAME, ShardInfo, load_index
from mds_core.format.shard import Schema, ShardReader
from mds_core.storage.raw_shards import raw_shard_path
from mds_core.streaming.memory import check_order_fits


class LocalDataset:
    """A map-style dataset over ``<local>/<split>/index.json`` and its shards.

    Args:
        local: the dataset directory.
        split: an optional sub-directory of ``local``.
        allow_unsafe_types: read ``pkl`` columns (unpickling untrusted data can run code).
        cache_dir: where decompressed shards go; defaults to next to the compressed files.
        source: the dataset as messages name it, when the directory is a copy of another (a remote
            folder's URL): an error in the index names the file to repair, not the copy. Default: the directory.
        index_source: its ``index.json`` as messages name it. Default: ``<source>/index.json``, or the local file.
        writable: ``ndarray`` values of random access (``ds[i]``) are writable copies, the caller's
            (default). False returns read-only views of the memory-mapped shard instead, which saves a
            copy per array, for a reader that never writes into them (torch warns on read-only arrays
            and cannot write through them).
    """

    def __init__(
        self,
        local: str | os.PathLike[str],
        split: str | None = None,
        *,
        allow_unsafe_types: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        source: str | None = None,
        index_source: str | None = None,
        writable: bool = True,
    ) -> None:
        self.local = os.fspath(local)
        self.writable = writable
        self.split = split
        self.root = os.path.join(self.local, split or "")
        self.cache_dir = os.fspath(cache_dir) if cache_dir is not None else None
        index_path = os.path.join(self.root, INDEX_BASENAME)
        default_index = index_path if source is None else f"{source.rstrip('/')}/{INDEX_BASENAME}"
        self.index_source = index_source or default_index
        self.shards: list[ShardInfo] = load_index(index_path, self.index_source)
        self._schemas = _build_schemas(self.shards, source or self.root, allow_unsafe_types)
        self._ends = list(accumulate(s.samples for s in self.shards))
        self._starts = [end - s.samples for end, s in zip(self._ends, self.shards)]
        self._readers: list[ShardReader | None] = [None] * len(self.shards)
        # What opening a shard reads, as arrays: a DataLoader worker that reads a shard's index entry writes
        # the counts of its objects, copying the pages they lie on from the rank (with ShardOwners, 4.1 MiB
        # a worker that opens each of 10**4 shards).
        self.shard_samples = np.array([s.samples for s in self.shards], np.int64)  # per shard, read-only
        self.shard_bytes = np.array([s.raw_data.bytes for s in self.shards], np.int64)  # raw file sizes, read-only
        self._plain_name_of = np.array([b"" if s.zip_data else s.raw_data.basename.encode() for s in self.shards])
        # Set by Stream for remote data: fetches shards into this directory on first use.
        self.shard_cache: Any = None
        # With a cache limit, at most this many shards stay mapped, so evicted files free their disk.
        self.max_open: int | None = None
        self._open_order: list[int] = []
        self._num_samples = self._ends[-1] if self._ends else 0

    @property
    def num_samples(self) -> int:
        """Samples in the dataset."""
        return self._num_samples

    @property
    def size(self) -> int:
        """The number of samples, as the reference's ``size``."""
        return self.num_samples

    def __len__(self) -> int:
        return self.num_samples

    @overload
    def __getitem__(self, index: int | np.integer[Any]) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice | list[Any] | tuple[Any, ...] | np.ndarray) -> list[Any]: ...

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int and 0 <= index < self._num_samples:  # the hot path, inlined
            shard_id = bisect_right(self._ends, index)
            reader = self._readers[shard_id] or self.open_shard(shard_id)
            return reader[index - self._starts[shard_id]]
        return select(self.get_item, self.num_samples, index)

    def get_item(self, index: int) -> dict[str, Any]:
        """The sample at global ``index``.

        Args:
            index: the sample's position over all shards; negative counts from the end.
        """
        num_samples = self.num_samples
        if index < 0:
            index += num_samples
        if not 0 <= index < num_samples:
            raise SampleIndexError(f"sample index {index} is out of range for {num_samples} samples in {self.root}")
        shard_id = bisect_right(self._ends, index)
        reader = self._readers[shard_id] or self.open_shard(shard_id)
        return reader[index - self._starts[shard_id]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for shard_id, shard in enumerate(self.shards):
            if shard.samples:
                yield from self._readers[shard_id] or self.open_shard(shard_id)

    def is_open(self, shard_id: int) -> bool:
        """Whether the shard's reader is open (reading it needs no download nor decompression).

        Args:
            shard_id: the shard's position in the index.
        """
        return self._readers[shard_id] is not None

    def shard_reader(self, shard_id: int) -> ShardReader:
        """The open reader of one shard (opened on first use).

        Args:
            shard_id: the shard's position in the index.
        """
        return self._readers[shard_id] or self.open_shard(shard_id)

    def schema_of(self, shard_id: int) -> Schema:
        """The columns of one shard, to decode its samples with.

        Args:
            shard_id: the shard's position in the index.
        """
        return self._schemas[shard_id]

    def open_shard(self, shard_id: int) -> ShardReader:
        """Open (downloading or decompressing once if needed) and memory-map one shard.

        Args:
            shard_id: the shard's position in the index.
        """
        samples, size = int(self.shard_samples[shard_id]), int(self.shard_bytes[shard_id])
        for attempt in range(3):
            path = self._raw_path(shard_id)
            try:
                reader = ShardReader.open(path, self._schemas[shard_id], samples, size, self.writable)
                break
            except FileNotFoundError:
                if self.shard_cache is None or attempt == 2:
                    raise CorruptShardError(f"{path}: shard file is missing") from None
                # evicted by another process between ensure() and open(): fetch it again
        self._readers[shard_id] = reader
        if self.max_open is not None:
            self._close_oldest(keep=shard_id)
        return reader

    def _raw_path(self, shard_id: int) -> str:
        """Where the shard's raw file is: fetched, decompressed, or (a plain shard) in the directory."""
        if self.shard_cache:
            return self.shard_cache.ensure(shard_id)  # type: ignore[no-any-return]
        if name := self._plain_name_of[shard_id]:  # a missing file is reported by the caller
            return os.path.join(self.root, name.decode())
        return raw_shard_path(self.root, self.shards[shard_id], self.cache_dir)

    def close_if_deleted(self, shard_id: int) -> None:
        """Close the shard's reader if its file is gone, so the next read fetches it again.

        Args:
            shard_id: the shard's position in the index.
        """
        reader = self._readers[shard_id]
        if reader is not None and not os.path.exists(reader.path):
            self._readers[shard_id] = None
            if shard_id in self._open_order:
                self._open_order.remove(shard_id)
            reader.close()

    def _close_oldest(self, keep: int) -> None:
        self._open_order.append(keep)
        while len(self._open_order) > max(1, self.max_open or 1):
            oldest = self._open_order.pop(0)
            reader, self._readers[oldest] = self._readers[oldest], None
            if reader is not None:
                reader.close()

    def close(self) -> None:
        """Close every open shard reader."""
        for reader in self._readers:
            if reader is not None:
                reader.close()
        self._readers = [None] * len(self.shards)
        self._open_order = []
        if self.shard_cache is not None:
            self.shard_cache.close()

    def __enter__(self) -> LocalDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Memory maps cannot be pickled; DataLoader workers reopen shards on first use.
        state = self.__dict__.copy()
        state["_readers"] = [None] * len(self.shards)
        state["_open_order"] = []
        return state


def select(get_item: Callable[[int], Any], num_samples: int, index: Any) -> Any:
    """``dataset[index]`` for an int (negative counts from the end), a slice, or a list/array of them."""
    if isinstance(index, (int, np.integer)):
        return get_item(int(index))
    if isinstance(index, slice):
        return [get_item(i) for i in range(*index.indices(num_samples))]
    if isinstance(index, (list, tuple, np.ndarray)):
        return [select(get_item, num_samples, i) for i in index]
    raise TypeError(f"dataset indices must be int, slice, list or numpy array, not {type(index).__name__}")


@contextlib.contextmanager
def ordering(readers: list[LocalDataset], samples: int, epoch: int) -> Iterator[None]:
    """Around computing an epoch's order.

    Refused first if it cannot fit in memory (``check_order_fits``), and a ``MemoryError`` becomes ``EpochMemoryError``;
    both name the largest claim.

    The order takes memory in proportion to the samples the indexes claim, and is computed before
    any shard is opened: an index whose counts are damaged, but agree with its own file sizes, shows here.
    """

    def largest() -> str:
        count, index, shard_id = max((s.samples, r.index_source, i) for r in readers for i, s in enumerate(r.shards))
        return f"{index}: shard {shard_id} claims the most ({count:,} samples)"

    check_order_fits(samples, epoch, largest)
    try:
        yield
    except MemoryError as err:
        raise EpochMemoryError(
            f"epoch {epoch}: the order of its {samples:,} samples does not fit in memory; {largest()}. If the "
            "data is not that large, that index is damaged: `mds verify` checks it against the shard files"
        ) from err


def _build_schemas(shards: list[ShardInfo], root: str, allow_unsafe_types: bool) -> list[Schema]:
    """One schema per shard, shared between shards with the same columns."""
    by_columns: dict[tuple[tuple[str, ...], tuple[str, ...]], Schema] = {}
    schemas = []
    for shard_id, shard in enumerate(shards):
        key = (tuple(shard.column_names), tuple(shard.column_encodings))
        if key not in by_columns:
            by_columns[key] = _schema_for(shard, f"{root}: shard {shard_id}", allow_unsafe_types)
        schemas.append(by_columns[key])
    return schemas


def _schema_for(shard: ShardInfo, where: str, allow_unsafe_types: bool) -> Schema:
    for name, encoding in zip(shard.column_names, shard.column_encodings):
        if not is_mds_encoding_safe(encoding) and not allow_unsafe_types:
            raise UnsafeEncodingError(
                f"Column {name} contains an unsafe type: {encoding}. {where}: unpickling untrusted data "
                "can run code; pass allow_unsafe_types=True if you trust this dataset"
            )
    try:
        schema = Schema(shard.column_names, shard.column_encodings)
    except UnknownEncodingError as err:
        raise UnknownEncodingError(f"{where}: {err}") from err
    for column, size in zip(schema.columns, shard.column_sizes):
        if column.size != size:
            raise InvalidIndexError(
                f"{where}: column {column.name!r} ({column.coder.name}) has size {column.size} but the index says {size}"
            )
    return schema
