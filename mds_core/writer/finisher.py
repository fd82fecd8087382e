"""The background half of ``MDSWriter``: compress chunks while a shard fills, then hash and store whole shards.

Everything runs on one thread, in order, so a shard's compressed pieces come out in sequence and at
most one finished shard waits to be stored (memory stays at about two shards). Storing goes through
an ``Output`` (``mds_core.storage.output``): a local directory, or local staging uploaded in the
background.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from mds_core.format.compression import Codec, get_codec
from mds_core.format.hashing import digests
from mds_core.format.index import FileInfo, ShardInfo
from mds_core.format.shard import shard_head
from mds_core.storage.output import Output, result_of


class ShardFinisher:
    """The background half of the writer: compress chunks, then hash and write whole shards."""

    def __init__(self, output: Output, config: dict[str, Any], progress: bool) -> None:
        self.output, self.config = output, config
        self.codec: Codec | None = get_codec(config["compression"])
        self.hashes: list[str] = config["hashes"]
        self.header = json.dumps(config, sort_keys=True).encode("utf-8")
        self.compresses_chunks = self.codec is not None and self.codec.concatenable
        self.shards: list[ShardInfo] = []
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mds-writer")
        # Used on the executor's one thread only: a compression context is not thread-safe.
        self._compress = self.codec.compressor() if self.codec is not None else None
        self._pending: Future[ShardInfo] | None = None
        self._progress = _progress_bar(output.location) if progress else None

    @property
    def next_index(self) -> int:
        """The index of the next shard to be finished."""
        return len(self.shards) + (self._pending is not None)

    def compress(self, parts: list[bytes | memoryview]) -> Future[bytes]:
        """Compress one piece of a shard in the background."""
        compress = self._compress
        assert compress is not None  # called only when there is a codec
        return self._executor.submit(lambda: compress(b"".join(parts)))

    def submit(self, sizes: list[int], parts: list[bytes | memoryview], chunks: list[Future[bytes]]) -> None:
        """Finish a shard in the background (after the previous one, so at most one waits in memory)."""
        self.wait()  # keeps at most one finished shard in memory
        self._pending = self._executor.submit(self._store, self.next_index, sizes, parts, chunks)

    def wait(self) -> None:
        """Wait for the shard being finished and record it."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.shards.append(result_of(pending))  # the caller's error, not the thread's traceback
            if self._progress is not None:
                self._progress.update(1)

    def _store(
        self, index: int, sizes: list[int], parts: list[bytes | memoryview], chunks: list[Future[bytes]]
    ) -> ShardInfo:
        # Uncompressed shards go to disk straight from the sample buffers, never joined in memory.
        head = shard_head(sizes, self.header)
        parts = [head, *parts]
        raw_name = f"shard.{index:05}.mds"
        raw_info = FileInfo(raw_name, sum(map(len, parts)), digests(self.hashes, parts))
        zip_info = None
        codec, compress = self.codec, self._compress  # both set, or neither
        if codec is None or compress is None:
            self.output.write_file(raw_name, parts)
        else:
            if self.compresses_chunks:
                pieces = [compress(head), *(chunk.result() for chunk in chunks)]
            else:
                pieces = [compress(b"".join(parts))]
            zip_name = f"{raw_name}.{codec.extension}"
            zip_info = FileInfo(zip_name, sum(map(len, pieces)), digests(self.hashes, pieces))
            self.output.write_file(zip_name, pieces)
        return ShardInfo.from_config(self.config, raw_info, len(sizes), zip_info)

    def close(self, discard: bool = False) -> None:
        """Wait for the last shard (or drop it with ``discard``) and stop the threads."""
        if discard and self._pending is not None:
            with contextlib.suppress(BaseException):  # the error being reported is the caller's
                self._pending.result()
            self._pending = None
        self._executor.shutdown(wait=True, cancel_futures=discard)
        if self._progress is not None:
            self._progress.close()
        if discard:
            self.output.abort()


def _progress_bar(location: str) -> Any:
    from tqdm import tqdm  # 30 ms to import: only when a bar is wanted

    return tqdm(desc=f"shards -> {location}", unit="shard")
