"""``MDSWriter``: write samples as MDS shards plus ``index.json``, byte-compatible with the reference.

Samples are encoded in the caller's thread (or arrive encoded, in bulk, from ``mds_core.convert``).
Everything else runs on one background thread, in order: compressing the current shard in chunks
as it fills (zstd frames, gzip members and bz2 streams concatenate, so a shard's compressed file is
its head's piece followed by its chunks'), then hashing and writing each finished shard. At most one
finished shard waits to be stored, so memory stays at about two shards.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

import numpy as np

from mds_core.errors import ShardTooLargeError, WriterError
from mds_core.format.compression import get_codec
from mds_core.format.hashing import check_hash_list
from mds_core.format.index import ShardInfo, dumps_index
from mds_core.format.shard import MAX_SHARD_BYTES, Schema
from mds_core.sizes import parse_size_limit
from mds_core.storage.output import open_output
from mds_core.writer.finisher import ShardFinisher

_WRITER_KWARGS = {"progress_bar", "max_workers", "retry", "exist_ok"}
CHUNK_BYTES = 4 << 20  # compress this much at a time while the shard is still filling
# zstd chooses its parameters by input size, and up to 128 KiB its level-3 ones compress about 1.5x
# faster than the large-input ones at the same or a better ratio (floats and text alike, measured);
# 112 KiB leaves room for the sample that closes a chunk. gzip and bz2 keep big chunks (bz2's blocks
# are up to 900 KB).
ZSTD_CHUNK_BYTES = 112 << 10


class MDSWriter:
    """Write MDS shards; use it as a context manager, or call ``finish()``.

    Arguments and defaults follow ``streaming.MDSWriter``; what differs (durable, atomic files; nothing
    published after an exception) is in [Differences from Mosaic Streaming](differences.md#writing).

    Args:
        columns: column name -> encoding, e.g. ``{"id": "int", "tokens": "ndarray:uint16:2048"}``.
        out: a local directory, a remote URL (``s3://...``, ``gs://...``; staged in a temporary
            directory), or ``(local, remote)``. Shards upload in the background as they are written;
            ``index.json`` goes up last, after every shard upload has succeeded.
        keep_local: keep local files after upload (for remote output).
        compression: ``None``, ``"zstd"``, ``"zstd:7"``, ``"gz"``, ``"bz2"``, ``"br"`` or ``"snappy"``.
        hashes: hash algorithms recorded per shard file; sorted and unique.
        size_limit: the most bytes in one raw shard, as an int or a string like ``"64mb"``; falsy for one shard.
        **kwargs: ``retry`` (total attempts per upload, default 2), ``max_workers`` (parallel uploads,
            default 4), ``exist_ok`` (replace a non-empty output directory instead of raising) and
            ``progress_bar`` (show a bar of shards written); any other name raises ``WriterError``.
    """

    format = "mds"

    def __init__(
        self,
        *,
        columns: dict[str, str],
        out: str | os.PathLike[str] | tuple[str, str],
        keep_local: bool = False,
        compression: str | None = None,
        hashes: list[str] | None = None,
        size_limit: int | str | None = 1 << 26,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(kwargs) - _WRITER_KWARGS)
        if unknown:
            raise WriterError(f"Invalid Writer argument(s): {unknown}; accepted: {sorted(_WRITER_KWARGS)}")
        if not isinstance(columns, dict) or not columns:
            raise WriterError("columns must be a non-empty dict of column name -> encoding")
        self.columns = dict(columns)
        self.schema = Schema.from_columns(self.columns)
        self.compression = compression or None
        self.hashes = check_hash_list(hashes)
        self.size_limit = parse_size_limit(size_limit)
        self.keep_local = keep_local
        get_codec(self.compression)  # an unknown or uninstalled codec fails before any output exists
        output = open_output(
            out,
            exist_ok=bool(kwargs.get("exist_ok", False)),
            keep_local=keep_local,
            retry=kwargs.get("retry", 2),
            max_workers=kwargs.get("max_workers"),
        )
        self._finisher = ShardFinisher(output, self.get_config(), bool(kwargs.get("progress_bar", False)))
        self._shard_base = 8 + len(self._finisher.header)  # sample count + first offset + header
        family = self.compression.partition(":")[0] if self.compression else None
        self._chunk_limit = ZSTD_CHUNK_BYTES if family == "zstd" else CHUNK_BYTES
        self._start_shard()
        self._finished = False

    @property
    def shards(self) -> list[ShardInfo]:
        """Index entries of the shards stored so far."""
        return self._finisher.shards

    def get_config(self) -> dict[str, Any]:
        """The per-shard config, which every shard file carries as its JSON header."""
        return {
            "column_encodings": self.schema.encodings,
            "column_names": self.schema.names,
            "column_sizes": [c.size for c in self.schema.columns],
            "compression": self.compression,
            "format": self.format,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "version": 2,
        }

    def _start_shard(self) -> None:
        # The shard as its samples' byte pieces (values are referenced, not copied) and sizes.
        self._parts: list[bytes | memoryview] = []  # memoryviews: runs of write_many's encoded buffer
        self._sizes: list[int] = []
        self._shard_bytes = self._shard_base
        self._chunk_start, self._chunk_bytes = 0, 0
        self._chunks: list[Future[bytes]] = []

    def write(self, sample: dict[str, Any]) -> None:
        """Encode and buffer one sample, starting a new shard when this one would pass ``size_limit``.

        Args:
            sample: a value for every column, of the column's encoding.
        """
        self._check_open()
        self._add_encoded(self.schema.encode_parts(sample))

    def write_encoded(self, sample: bytes) -> None:
        """Add one sample already encoded in this writer's MDS layout (what ``write`` would encode).

        The bytes are taken as they are: the variable-size columns' u32 sizes, then every column's
        bytes, columns sorted by name. ``mds_core.convert`` produces them column-wise from Arrow.

        Args:
            sample: one encoded sample.
        """
        self._check_open()
        self._add_encoded([sample])

    def write_encoded_many(self, data: Any, sizes: Any) -> None:
        """Add ``len(sizes)`` encoded samples lying back to back in the buffer ``data``.

        The result is byte for byte what ``write_encoded`` once per sample gives (the same shard and
        compression-chunk boundaries), without a Python call per sample. ``data`` is referenced,
        not copied, until its shard is stored.

        Args:
            data: a buffer holding the encoded samples, back to back.
            sizes: each sample's size in bytes, in order (they sum to the buffer's size).
        """
        self._check_open()
        sizes = np.asarray(sizes, np.int64).reshape(-1)
        view = memoryview(data).cast("B")
        if int(sizes.sum()) != view.nbytes or (sizes.size and int(sizes.min()) < 0):
            raise WriterError(
                f"write_encoded_many: {view.nbytes} bytes of data do not split into the given "
                f"{sizes.size} sample sizes (total {int(sizes.sum())})"
            )
        ends = np.cumsum(sizes)  # where each sample ends in ``data``
        first = 0
        while first < sizes.size:
            stop = self._samples_that_fit(sizes, ends, first)
            self._append_run(view, sizes, ends, first, stop)
            first = stop

    def _check_open(self) -> None:
        if self._finished:
            raise WriterError(f"writer for {self._finisher.output.location} is finished; create a new MDSWriter")

    def _add_encoded(self, parts: list[bytes]) -> None:
        size = sum(map(len, parts))
        self._make_room(size)
        self._parts.extend(parts)
        self._sizes.append(size)
        self._shard_bytes += size + 4  # the sample plus its offset-table entry
        self._chunk_bytes += size
        if self._chunk_bytes >= self._chunk_limit:
            self._compress_chunk()

    def _make_room(self, size: int) -> None:
        need = size + 4
        if self.size_limit and self._sizes and self._shard_bytes + need > self.size_limit:
            self.flush_shard()  # never flush an empty shard: a big sample gets a shard of its own
        if self._shard_bytes + need > MAX_SHARD_BYTES:
            raise ShardTooLargeError(
                f"shard {self._finisher.next_index} in {self._finisher.output.location} would pass 4 GiB "
                f"({self._shard_bytes + need} bytes), which MDS offsets cannot address; set a smaller "
                "size_limit such as '64mb'"
            )

    def _samples_that_fit(self, sizes: np.ndarray, ends: np.ndarray, first: int) -> int:
        """The end of the samples from ``first`` on that go into the current shard (flushing it first if none would)."""
        self._make_room(int(sizes[first]))
        limit = min(self.size_limit or MAX_SHARD_BYTES, MAX_SHARD_BYTES)
        start = int(ends[first] - sizes[first])
        # Shard bytes after samples first..i: shard + (ends[i] - start) + 4 * (i - first + 1).
        room = limit - self._shard_bytes + start + 4 * first
        stops = ends[first:] + 4 * np.arange(first + 1, sizes.size + 1)
        return first + max(1, int(np.searchsorted(stops, room, side="right")))

    def _append_run(self, view: memoryview, sizes: np.ndarray, ends: np.ndarray, first: int, stop: int) -> None:
        """Add samples ``first:stop`` (they fit in the current shard), cutting compression chunks where ``write`` would."""
        while first < stop:
            start = int(ends[first] - sizes[first])
            # The first sample that fills the chunk closes it, as in ``write``.
            reach = self._chunk_limit - self._chunk_bytes + start
            last = min(first + int(np.searchsorted(ends[first:stop], reach, side="left")), stop - 1)
            nbytes = int(ends[last]) - start
            self._parts.append(view[start : start + nbytes])
            self._sizes.extend(sizes[first : last + 1].tolist())
            self._shard_bytes += nbytes + 4 * (last + 1 - first)
            self._chunk_bytes += nbytes
            if self._chunk_bytes >= self._chunk_limit:
                self._compress_chunk()
            first = last + 1

    def _compress_chunk(self) -> None:
        if self._finisher.compresses_chunks and self._chunk_start < len(self._parts):
            self._chunks.append(self._finisher.compress(self._parts[self._chunk_start :]))
        self._chunk_start, self._chunk_bytes = len(self._parts), 0

    def flush_shard(self) -> None:
        """Hand the buffered samples to the background thread as one shard."""
        if not self._sizes:
            return
        self._compress_chunk()
        self._finisher.submit(self._sizes, self._parts, self._chunks)
        self._start_shard()

    def finish(self) -> None:
        """Store the last shard and publish ``index.json``; the dataset is complete after this."""
        if self._finished:
            return
        try:
            self.flush_shard()
            self._finisher.wait()
            self._finisher.output.publish_index(dumps_index(self.shards).encode("utf-8"))
        except BaseException:
            self.abort()
            raise
        self._finished = True
        self._finisher.close()

    def abort(self) -> None:
        """Stop without publishing an index, and remove the shards written so far."""
        if self._finished:
            return
        self._finished = True
        self._start_shard()
        self._finisher.close(discard=True)

    def __enter__(self) -> MDSWriter:
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        # Unlike the reference, an exception inside `with` publishes nothing: no index, no shards.
        if exc_type is None:
            self.finish()
        else:
            self.abort()
