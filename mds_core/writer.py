"""``MDSWriter``: write samples as MDS shards plus ``index.json``, byte-compatible with the reference.

Samples are encoded in the caller's thread; building, hashing, compressing and writing a finished
shard happens on one background thread, so the next shard is encoded while the last one is stored.
At most one shard is in flight, which bounds memory to about two shards.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from mds_core.errors import ShardTooLargeError, WriterError
from mds_core.format.compression import Codec, get_codec
from mds_core.format.hashing import check_hash_list, get_hash
from mds_core.format.index import FileInfo, ShardInfo, dumps_index
from mds_core.format.shard import MAX_SHARD_BYTES, Schema, build_shard
from mds_core.storage.output import open_output
from mds_core.units import parse_size_limit

_WRITER_KWARGS = {"progress_bar", "max_workers", "retry", "exist_ok"}


class MDSWriter:
    """Write MDS shards. Arguments and defaults follow ``streaming.MDSWriter``.

    Args:
        columns: column name -> encoding, e.g. ``{"id": "int", "tokens": "ndarray:uint16:2048"}``.
        out: the output directory (remote URLs come with the storage layer).
        keep_local: keep local files after upload (for remote output).
        compression: ``None``, ``"zstd"``, ``"zstd:7"``, ``"gz"``, ``"bz2"``, ``"br"`` or ``"snappy"``.
        hashes: hash algorithms recorded per shard file; sorted and unique.
        size_limit: the most bytes in one raw shard, as an int or a string like ``"64mb"``; falsy for one shard.
        exist_ok: replace a non-empty output directory instead of raising.
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
        self.codec: Codec | None = get_codec(self.compression)
        self.hashes = check_hash_list(hashes)
        self.size_limit = parse_size_limit(size_limit)
        self.keep_local = keep_local
        self.progress_bar = bool(kwargs.get("progress_bar", False))
        self._output = open_output(out, exist_ok=bool(kwargs.get("exist_ok", False)))
        self._header = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        self._shard_base = 8 + len(self._header)  # sample count + first offset + header
        self._samples: list[bytes] = []
        self._shard_bytes = self._shard_base
        self.shards: list[ShardInfo] = []
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mds-writer")
        self._pending: Future[ShardInfo] | None = None
        self._finished = False
        self._progress = _progress(self.progress_bar, self._output.location)

    def get_config(self) -> dict[str, Any]:
        """The per-shard config, which every shard file carries as its JSON header."""
        return {
            "column_encodings": [self.columns[c.name] for c in self.schema.columns],
            "column_names": [c.name for c in self.schema.columns],
            "column_sizes": [c.size for c in self.schema.columns],
            "compression": self.compression,
            "format": self.format,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "version": 2,
        }

    def write(self, sample: dict[str, Any]) -> None:
        """Encode and buffer one sample, starting a new shard when this one would pass ``size_limit``."""
        if self._finished:
            raise WriterError(f"writer for {self._output.location} is finished; create a new MDSWriter")
        data = self.schema.encode(sample)
        need = len(data) + 4  # the sample plus its offset-table entry
        limit = self.size_limit or MAX_SHARD_BYTES
        if self._shard_bytes + need > limit and self._samples and self.size_limit:
            self.flush_shard()  # never flush an empty shard: a big sample gets a shard of its own
        if self._shard_bytes + need > MAX_SHARD_BYTES:
            raise ShardTooLargeError(
                f"shard {len(self.shards) + (self._pending is not None)} in {self._output.location} would pass "
                f"4 GiB ({self._shard_bytes + need} bytes), which MDS offsets cannot address; set a smaller "
                "size_limit such as '64mb'"
            )
        self._samples.append(data)
        self._shard_bytes += need

    def flush_shard(self) -> None:
        """Hand the buffered samples to the background thread as one shard."""
        if not self._samples:
            return
        samples, self._samples, self._shard_bytes = self._samples, [], self._shard_base
        self._wait_pending()
        self._pending = self._executor.submit(self._store_shard, len(self.shards), samples)

    def _wait_pending(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.shards.append(pending.result())
            self._progress.update(1)

    def _store_shard(self, index: int, samples: list[bytes]) -> ShardInfo:
        raw = build_shard(samples, self._header)
        raw_name = f"shard.{index:05}.mds"
        raw_info = FileInfo(raw_name, len(raw), {algo: get_hash(algo, raw) for algo in self.hashes})
        zip_info = None
        if self.codec is None:
            self._output.write_file(raw_name, raw)
        else:
            data = self.codec.compress(raw)
            zip_name = f"{raw_name}.{self.codec.extension}"
            zip_info = FileInfo(zip_name, len(data), {algo: get_hash(algo, data) for algo in self.hashes})
            self._output.write_file(zip_name, data)
        return ShardInfo(
            column_encodings=[self.columns[c.name] for c in self.schema.columns],
            column_names=[c.name for c in self.schema.columns],
            column_sizes=[c.size for c in self.schema.columns],
            compression=self.compression,
            hashes=self.hashes,
            raw_data=raw_info,
            samples=len(samples),
            size_limit=self.size_limit,
            zip_data=zip_info,
        )

    def finish(self) -> None:
        """Store the last shard and publish ``index.json``; the dataset is complete after this."""
        if self._finished:
            return
        try:
            self.flush_shard()
            self._wait_pending()
            self._output.publish_index(dumps_index(self.shards).encode("utf-8"))
        except BaseException:
            self.abort()
            raise
        self._close()

    def abort(self) -> None:
        """Stop without publishing an index, and remove the shards written so far."""
        if self._finished:
            return
        if self._pending is not None:
            self._pending.cancel()
            try:
                self._pending.result()
            except BaseException:
                pass  # the original error is the one being reported
            self._pending = None
        self._close()
        self._output.abort()

    def _close(self) -> None:
        self._finished = True
        self._samples = []
        self._executor.shutdown(wait=True)
        self._progress.close()

    def __enter__(self) -> "MDSWriter":
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        # Unlike the reference, an exception inside `with` publishes nothing: no index, no shards.
        if exc_type is None:
            self.finish()
        else:
            self.abort()


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(enabled: bool, location: str) -> Any:
    if not enabled:
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(desc=f"shards -> {location}", unit="shard")
