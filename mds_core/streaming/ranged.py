"""An iteration's first samples read by byte ranges while their whole shards download.

An uncompressed MDS shard begins with its sample count and the offset of every sample, so one sample
can be read alone: a range read of the part of the offset table it needs, then one of the sample. A
shuffled iteration's first block (at most 256 samples, ``arrival.block_bounds``) spans most shards.
Reading just its samples moves a few hundred KiB in two round trips where the whole shards are hundreds
of MiB, while the shards download behind it for the blocks after. A shard's samples of the first block
come from whichever is here first: their ranges or the whole file.

Shards that keep the download-then-read path:
- compressed ones: zstd and the others compress a shard whole, so finding a sample in one means
  decompressing it from the start;
- with ``validate_hash``: a hash covers the whole file, and ranges would hand out bytes unchecked;
- shards on a store that cannot read part of a file (``RemoteStore.reads_ranges``);
- a block whose whole files hold under ``BYTES_PER_REQUEST`` per range request: each request has a cost
  of its own, and fetching the few files whole is then as quick.

A failed or damaged range read is left to the whole file, whose reader names the damage.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import numpy as np

from mds_core.errors import MDSError
from mds_core.streaming.arrival import by_shard, shard_ready

# Ranges are read only where the whole files they stand in for hold this much per range request. A request costs
# the client about 1 ms of CPU (botocore), and the loopback moto server 3 ms more; 2 MiB takes about 5 ms at
# 400 MB/s. A block of 256 samples over 11 shards of 16 MiB (0.7 MiB per request) waits for its whole shards; over
# 256 shards of 16 MiB (8 MiB per request) it is read by ranges.
BYTES_PER_REQUEST = 2 << 20
_U32 = np.dtype("<u4")

Parts = dict[int, list[bytes]]  # global shard id -> its samples' bytes, in the block's order


class RangedBlock:
    """The samples of one block read by byte ranges in a background thread, for the shards it is worth it for.

    Args:
        owners: the (reader, shard of that reader) holding each global shard id.
        shard_ids: the block's global shard ids.
        local_ids: the block's sample ids within their shards.
    """

    def __init__(self, owners: Sequence[tuple[Any, int]], shard_ids: np.ndarray, local_ids: np.ndarray) -> None:
        self._owners = owners
        self._wanted = {
            int(shard_ids[positions[0]]): local_ids[positions]
            for positions in by_shard(shard_ids)
            if can_read_ranges(*owners[int(shard_ids[positions[0]])])
        }
        whole_bytes = sum(self._shard_info(shard).raw_data.bytes for shard in self._wanted)
        requests = len(self._wanted) + sum(len(ids) for ids in self._wanted.values())  # a head per shard, a sample each
        if whole_bytes < BYTES_PER_REQUEST * requests:
            self._wanted = {}
        self._parts: Future[Parts] = Future()
        if self._wanted:
            threading.Thread(target=self._run, name="mds-first-ranges", daemon=True).start()
        else:
            self._parts.set_result({})

    def wait(self, shard: int) -> None:
        """Until the shard's samples are here by ranges, or its whole file is (whichever is first)."""
        if shard not in self._wanted or self._parts.done():
            return
        reader, shard_of_reader = self._owners[shard]
        download = reader.shard_cache.download_of(shard_of_reader)
        wait([self._parts] if download is None else [self._parts, download], return_when=FIRST_COMPLETED)

    def ready(self, shard: int) -> bool:
        """Whether the shard's samples of the block were read by ranges."""
        return self._parts.done() and self._parts.exception() is None and shard in self._parts.result()

    def take(self, shard: int) -> list[dict[str, Any]] | None:
        """The shard's samples of the block decoded from their ranges; None if not read so (or damaged)."""
        if not self.ready(shard):
            return None
        reader, shard_of_reader = self._owners[shard]
        schema = reader.schema_of(shard_of_reader)
        try:
            return [schema.decode(part, 0, len(part), reader.writable) for part in self._parts.result()[shard]]
        except MDSError:
            return None  # the whole file's reader names the sample and column

    def _run(self) -> None:
        try:
            self._parts.set_result(self._read())
        except BaseException as err:  # left to the whole files, which report their own errors
            self._parts.set_exception(err)

    def _read(self) -> Parts:
        """Each wanted shard's offsets, then its samples: two rounds of range reads, per store."""
        parts: Parts = {}
        for store, shards in self._by_store().items():
            names = {shard: self._shard_info(shard).raw_data.basename for shard in shards}
            heads = store.read_ranges([(names[shard], 0, 4 * (int(self._wanted[shard].max()) + 3)) for shard in shards])
            spans = {
                shard: sample_spans(self._shard_info(shard), self._wanted[shard], head)
                for shard, head in zip(shards, heads)
                if not shard_ready(*self._owners[shard])  # its whole file came first: read from there instead
            }
            ranges = [(names[shard], int(b), int(e)) for shard, span in spans.items() if span for b, e in span]
            answers = iter(store.read_ranges(ranges) if ranges else [])
            parts.update({shard: [next(answers) for _ in span] for shard, span in spans.items() if span})
        return parts

    def _by_store(self) -> dict[Any, list[int]]:
        stores: dict[int, tuple[Any, list[int]]] = {}
        for shard in self._wanted:
            store = self._owners[shard][0].shard_cache.store
            stores.setdefault(id(store), (store, []))[1].append(shard)
        return dict(stores.values())

    def _shard_info(self, shard: int) -> Any:
        reader, shard_of_reader = self._owners[shard]
        return reader.shards[shard_of_reader]


def can_read_ranges(reader: Any, shard_of_reader: int) -> bool:
    """Whether the shard's first-block samples may be read by ranges (see the module's list)."""
    cache = reader.shard_cache
    if cache is None or cache.validate_hash or not cache.store.reads_ranges:
        return False
    return reader.shards[shard_of_reader].zip_data is None and not shard_ready(reader, shard_of_reader)


def sample_spans(shard: Any, local_ids: np.ndarray, head: bytes) -> list[tuple[int, int]] | None:
    """``[begin, end)`` of each sample in the shard, from the head of its file; None if the head is not sound.

    Also None when the samples are over half the shard: the whole file is then as cheap.
    """
    count = int(np.frombuffer(head, _U32, 1)[0])
    offsets = np.frombuffer(head, _U32, len(head) // 4 - 1, 4).astype(np.int64)
    size = shard.raw_data.bytes
    if count != shard.samples or offsets[0] < 4 * (count + 2) or offsets[-1] > size or np.any(np.diff(offsets) < 0):
        return None
    begins, ends = offsets[local_ids], offsets[local_ids + 1]
    return list(zip(begins.tolist(), ends.tolist())) if int((ends - begins).sum()) <= size // 2 else None
