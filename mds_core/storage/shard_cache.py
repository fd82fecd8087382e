"""The node-local cache of a remote stream: each shard downloaded once per node, evicted least-recently-used.

Every rank and DataLoader worker on a node shares ``<local>/<split>/``. A shard is fetched under
an exclusive ``flock`` on its own lock file, so whichever process asks first downloads it and the
others block on the lock (no polling) and then find the finished file. Downloads and
decompression land under unique temporary names and are renamed into place, so a crash never
leaves a partial shard under a real name.

With ``cache_limit``, a small ledger file shared through ``mmap`` holds each shard's last use and
whether it is being fetched; making room evicts the least recently used shards that are neither
being fetched nor local-only. Deleting a file another process has memory-mapped is safe on POSIX:
its map stays valid until closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError, HashMismatchError, UnsafePathError
from mds_core.format.hashing import hasher
from mds_core.format.index import READER_CACHE, FileInfo, ShardInfo
from mds_core.storage.cache_stats import CacheStats
from mds_core.storage.download_threads import THREADS_PER_TRANSFER, download_threads
from mds_core.storage.files import file_lock, has_size, process_alive, remove_orphaned_temporaries, staged_path
from mds_core.storage.folders import cache_errors, inside
from mds_core.storage.kill_points import kill_point
from mds_core.storage.priority_gate import PriorityGate
from mds_core.storage.raw_shards import decompress_shard
from mds_core.storage.remote import RemoteStore

CACHE_DIR = READER_CACHE  # lock files and the ledger, inside the stream's local directory
HEAD_START_SECONDS = 1.0  # the longest the other downloads wait for the bytes of the shards needed first
_HASH_CHUNK = 8 << 20


class ShardCache:
    """Makes the raw files of ``shards`` present under ``root``, fetching from ``store``.

    Args:
        store: the remote directory that holds the stream's ``index.json`` and shards.
        root: the local directory the shards go to.
        shards: the stream's index entries.
        validate_hash: an algorithm to check each newly downloaded file with, or None.
        keep_zip: keep compressed files after decompressing them.
        cache_limit: bytes this cache may hold (shard files; the index is not counted), or None.
        threads: transfers run at once by ``prefetch``; None (the default): ``download_threads`` of
            the cache limit in force when downloads start (a dataset sets each stream's share after opening it).
            A download that waits (a throttled file's ``Retry-After``, a backoff) gives its slot to the next
            shard meanwhile, and takes the next free one back before any shard needed later.
        decompressions: how many of them may decompress at once (default: the CPUs this process may
            use); the shard needed soonest goes first.

    ``stats`` counts what this process's cache did (downloads, hits, misses, evictions); it may be
    replaced by a ``CacheStats`` over shared memory, and each process (a DataLoader worker, say)
    starts with fresh counters.
    """

    def __init__(
        self,
        store: RemoteStore,
        root: str,
        shards: list[ShardInfo],
        *,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        cache_limit: int | None = None,
        threads: int | None = None,
        decompressions: int | None = None,
    ) -> None:
        self.store, self.root, self.shards = store, root, shards
        self.validate_hash, self.keep_zip, self.cache_limit = validate_hash, keep_zip, cache_limit
        self._threads = threads
        self.decompressions = decompressions or _usable_cpus()
        if validate_hash:
            _check_hash_available(shards, validate_hash, store.url)
        self._dir = inside(root, CACHE_DIR)  # a link must not take the locks and the ledger elsewhere
        with cache_errors(root):
            os.makedirs(inside(root, f"{CACHE_DIR}/locks"), exist_ok=True)
            remove_orphaned_temporaries(root)  # partial downloads of processes killed mid-transfer
        self._key = _index_key(shards)
        self._ledger: _Ledger | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._transfers: PriorityGate | None = None  # ``threads`` slots, made with the pool
        self._futures: dict[int, Future[bool]] = {}
        self._need_order: dict[int, int] = {}  # shard -> its place in the order prefetch was asked for
        self._head_start = threading.Event()  # set when the shards needed first (``_heads``) have their bytes
        self._heads: set[int] = set()  # those of them still on their way
        self._heads_lock = threading.Lock()
        self._gate = PriorityGate(self.decompressions)
        self._pid = os.getpid()
        self.stats = CacheStats()

    def __getstate__(self) -> dict[str, Any]:
        # Threads, futures, maps and counters belong to one process; a DataLoader worker makes its own.
        state = self.__dict__.copy()
        state.update(
            _ledger=None,
            _pool=None,
            _transfers=None,
            _futures={},
            _need_order={},
            _gate=None,
            _head_start=None,
            _heads=set(),
            _heads_lock=None,
            stats=CacheStats(),
        )
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _gate=PriorityGate(state["decompressions"]), _pid=os.getpid())
        self._head_start, self._heads_lock = threading.Event(), threading.Lock()

    @property
    def threads(self) -> int:
        """Downloads run at once: as constructed, or by ``download_threads`` under the current ``cache_limit``."""
        return self._threads or download_threads(self.cache_limit)

    def _own_process(self) -> None:
        """In a forked child, forget the parent's threads, futures and gate (their threads are not here)."""
        if self._pid != os.getpid():
            self._pool, self._transfers, self._futures, self._need_order = None, None, {}, {}
            self._gate, self._head_start, self._pid = PriorityGate(self.decompressions), threading.Event(), os.getpid()
            self._heads, self._heads_lock = set(), threading.Lock()

    def shard_bytes(self, shard_id: int) -> int:
        """Disk the shard takes while cached: its raw file, plus its zip when zips are kept."""
        shard = self.shards[shard_id]
        kept_zip = shard.zip_data.bytes if shard.zip_data is not None and self.keep_zip else 0
        return shard.raw_data.bytes + kept_zip

    # ---------------------------------------------------------------------------------------------
    # the consumer side

    def ensure(self, shard_id: int) -> str:
        """The local path of the shard's raw file, fetching it first (once per node) if needed.

        Counted in ``stats`` as a hit if the shard was on disk before anyone in this process asked
        for it, else as a miss (this process's prefetch fetched it, or waited for another process).
        """
        self._own_process()
        started = time.perf_counter()
        future = self._futures.pop(shard_id, None)
        with cache_errors(self.root):
            # A failed prefetch reports its own error instead of retrying again.
            missed = future.result() if future is not None else False
            missed = self._make_present(shard_id) or missed  # evicted since the prefetch: fetched again
            self._touch(shard_id)
        self.stats.record_lookup(hit=not missed, wait_seconds=time.perf_counter() - started)
        return self._raw_path(shard_id)

    def is_ready(self, shard_id: int) -> bool:
        """Whether ``ensure(shard_id)`` would return without waiting for a download (as far as this process knows)."""
        future = self._futures.get(shard_id)
        if future is not None:
            return future.done()
        with cache_errors(self.root):
            return has_size(self._raw_path(shard_id), self.shards[shard_id].raw_data.bytes)

    def download_of(self, shard_id: int) -> Future[bool] | None:
        """The shard's prefetch not yet collected by ``ensure`` (done when its file is here), or None."""
        return self._futures.get(shard_id) if self._pid == os.getpid() else None

    def prefetch(self, shard_ids: Iterable[int], heads: int = 1) -> None:
        """Start fetching these shards in the background, in this order.

        The first ``heads`` shards asked for since the cache was made or closed go first: the others wait for their
        bytes (at most ``HEAD_START_SECONDS``), so the consumer's first step (a sample, or a DataLoader worker's first
        batch) does not share the network with later shards. Then ``threads`` downloads run at once.
        """
        self._own_process()
        if self._pool is None:
            self._transfers = PriorityGate(self.threads)
            threads = THREADS_PER_TRANSFER * self.threads  # the others wait (throttled, backing off) or decompress
            self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mds-download")
        for shard_id in shard_ids:
            if shard_id not in self._futures:
                if self._need_order.setdefault(shard_id, len(self._need_order)) < heads:
                    self._heads.add(shard_id)
                self._futures[shard_id] = self._pool.submit(self._prefetched, shard_id)
        with self._heads_lock:
            if not self._heads:  # none of this cache's shards is needed first (another stream's are): no wait
                self._head_start.set()

    def _prefetched(self, shard_id: int) -> bool:
        """``_make_present`` for prefetch: the shards needed first first, alone, the others after them."""
        head_start = self._head_start  # this prefetch round's (close() starts a new one)
        head = shard_id in self._heads
        if not head:
            head_start.wait(HEAD_START_SECONDS)
            if head_start is not self._head_start:
                return False  # closed while it waited: nobody wants this shard any more
        try:
            return self._make_present(shard_id)
        finally:
            if head:
                self._head_arrived(shard_id)  # (also when it was cached, came from another process or failed)

    def _head_arrived(self, shard_id: int) -> None:
        """One of the shards needed first has its bytes: once all have, the other downloads start."""
        with self._heads_lock:
            if shard_id in self._heads:
                self._heads.discard(shard_id)
                if not self._heads:
                    self._head_start.set()

    def _make_present(self, shard_id: int) -> bool:
        """Make the raw file present; whether it was missing when first looked for (a cache miss)."""
        raw = self.shards[shard_id].raw_data
        raw_path = self._raw_path(shard_id)
        if has_size(raw_path, raw.bytes):
            return False
        with file_lock(self._lock_path(shard_id)):
            if not has_size(raw_path, raw.bytes):  # another process may have fetched it meanwhile
                self._fetch(shard_id, raw_path)
        return True

    def _raw_path(self, shard_id: int) -> str:
        return os.path.join(self.root, self.shards[shard_id].raw_data.basename)

    def close(self, wait: bool = True) -> None:
        """Stop prefetching: queued downloads are dropped, running ones finish (waited for if ``wait``).

        An iteration the consumer leaves early (``next(iter(dataset))``, a loop left by ``break``)
        does not wait: its running downloads land in the cache in the background, under their locks.
        """
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool, self._transfers = None, None
        self._futures.clear()
        self._need_order.clear()
        self._head_start.set()  # wakes this round's waiters, which then see it closed
        self._head_start, self._heads = threading.Event(), set()

    # ---------------------------------------------------------------------------------------------
    # fetching

    def _fetch(self, shard_id: int, raw_path: str) -> None:
        shard = self.shards[shard_id]
        for info in shard.files:  # a link in the cache must not lead a download or decompression elsewhere
            inside(self.root, info.basename)
        ledger = self._ledger_or_none()
        if ledger is not None:
            ledger.reserve(shard_id, self.cache_limit or 0, self.shard_bytes, self._evict)
        try:
            rank = self._need_order.get(shard_id, -1)  # not prefetched: the consumer waits for it, so first
            if shard.zip_data is None:
                self._download(shard.raw_data, raw_path, rank)
            else:
                zip_path = os.path.join(self.root, shard.zip_data.basename)
                if not has_size(zip_path, shard.zip_data.bytes):
                    self._download(shard.zip_data, zip_path, rank)
                self._head_arrived(shard_id)  # its bytes are here: the others may use the network
                # Downloads run several at once and end together; decompressing them all at once would
                # share the CPUs among them, and the one the reader waits for would end last.
                with self._gate.slot(self._need_order.get(shard_id, -1)):
                    decompress_shard(zip_path, raw_path, shard)
                if not self.keep_zip:
                    os.unlink(zip_path)
        except BaseException:
            if ledger is not None:
                ledger.release(shard_id, present=False)
            raise
        if ledger is not None:
            ledger.release(shard_id, present=True)

    def _download(self, info: FileInfo, dest: str, rank: int) -> None:
        check = None
        if self.validate_hash:

            def check(path: str) -> None:
                _check_digest(path, info, self.validate_hash or "", self.store.url_of(info.basename))

        transfers = self._transfers
        with transfers.slot(rank) if transfers is not None else contextlib.nullcontext():
            started = time.perf_counter()  # from the transfer's start, not from the wait for its slot
            sleep = transfers.away if transfers is not None else None
            self.store.download(info.basename, dest, expected_bytes=info.bytes, check=check, sleep=sleep)
        self.stats.record_download(info.bytes, time.perf_counter() - started)

    def _evict(self, shard_id: int) -> None:
        self.stats.record_eviction()
        shard = self.shards[shard_id]
        for info in shard.files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(inside(self.root, info.basename))
            kill_point(f"evicted {info.basename}")

    # ---------------------------------------------------------------------------------------------
    # bookkeeping

    def _lock_path(self, shard_id: int) -> str:
        return os.path.join(self._dir, "locks", f"{self._key}-{shard_id}.lock")

    def _ledger_or_none(self) -> _Ledger | None:
        if self.cache_limit is None:
            return None
        if self._ledger is None:
            self._ledger = _Ledger(self._dir, self._key, len(self.shards), self._is_present)
        return self._ledger

    def _is_present(self, shard_id: int) -> bool:
        shard = self.shards[shard_id]
        return any(
            info is not None and has_size(os.path.join(self.root, info.basename), info.bytes)
            for info in (shard.raw_data, shard.zip_data)
        )

    def _touch(self, shard_id: int) -> None:
        ledger = self._ledger_or_none()
        if ledger is not None:
            ledger.touch(shard_id)


class _Ledger:
    """Per shard: last use in ns (0 = not cached) and the pid fetching it (0 = none), in a shared file."""

    def __init__(self, directory: str, key: str, num_shards: int, is_present: Any) -> None:
        self.lock_path = os.path.join(directory, f"ledger-{key}.lock")
        path = os.path.join(directory, f"ledger-{key}.u64")
        with file_lock(self.lock_path):
            if not has_size(path, 16 * num_shards):
                # A new ledger starts from what is on disk (files left by an earlier run count as old).
                table = np.zeros((num_shards, 2), np.uint64)
                table[:, 0] = [1 if is_present(i) else 0 for i in range(num_shards)]
                with staged_path(path, durable=False) as tmp:  # a cache's ledger: rebuilt if lost
                    table.tofile(tmp)
        if os.path.islink(path):  # mapped read-write: never through a link to another file
            raise UnsafePathError(f"{path}: the cache's ledger is a symbolic link; remove it")
        self.table = np.memmap(path, np.uint64, "r+", shape=(num_shards, 2))

    def touch(self, shard_id: int) -> None:
        if self.table[shard_id, 0]:
            self.table[shard_id, 0] = time.time_ns()

    def reserve(self, shard_id: int, limit: int, size_of: Any, evict: Any) -> None:
        """Count the shard as cached, evicting the least recently used ones until it fits."""
        with file_lock(self.lock_path):
            cached = np.flatnonzero(self.table[:, 0])
            usage = sum(size_of(int(i)) for i in cached if i != shard_id)
            need = size_of(shard_id)
            candidates = [
                int(i)
                for i in cached[np.argsort(self.table[cached, 0], kind="stable")]
                if i != shard_id and not process_alive(int(self.table[i, 1]))
            ]
            for victim in candidates:
                if usage + need <= limit:
                    break
                evict(victim)
                self.table[victim, 0] = 0
                usage -= size_of(victim)
            self.table[shard_id] = (time.time_ns(), os.getpid())

    def release(self, shard_id: int, present: bool) -> None:
        with file_lock(self.lock_path):
            self.table[shard_id] = (time.time_ns() if present else 0, 0)


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _index_key(shards: list[ShardInfo]) -> str:
    """Short, stable name for this index's shard list, so a changed index gets a fresh ledger."""
    text = "\n".join(
        f"{s.raw_data.basename}:{s.raw_data.bytes}:{s.zip_data.bytes if s.zip_data else ''}" for s in shards
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _check_hash_available(shards: list[ShardInfo], algo: str, url: str) -> None:
    for shard in shards:
        info = shard.zip_data or shard.raw_data
        if algo not in info.hashes:
            raise ConfigurationError(
                f"{url}: validate_hash={algo!r} but {info.basename} records only {sorted(info.hashes) or 'no'} "
                "hashes; pick one of those or write the dataset with hashes=[...]"
            )


def _check_digest(path: str, info: FileInfo, algo: str, url: str) -> None:
    digest = hasher(algo)()
    with open(path, "rb") as file:
        while chunk := file.read(_HASH_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != info.hashes[algo]:
        raise HashMismatchError(
            f"{url}: {algo} checksum mismatch (got {digest.hexdigest()}, index says {info.hashes[algo]}); "
            "the remote object is corrupt or was replaced"
        )
