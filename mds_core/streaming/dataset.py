"""``StreamingDataset``: the reference's sample order over one or more MDS streams, resumable mid-epoch.

Each epoch's order is a pure function of the streams' shard sizes, the settings and the world
(``mds_core.order``). One process per node computes it and shares it through a memory-mapped file
in the job directory; each DataLoader worker then reads its own row and yields those samples.
"""

from __future__ import annotations

import math
import sys
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import fields
from itertools import accumulate
from typing import Any

import numpy as np

from mds_core.errors import EmptyStreamError, SampleIndexError
from mds_core.format.index import ShardInfo
from mds_core.order import OrderSpec
from mds_core.order.schedule import Schedule
from mds_core.order.world import World
from mds_core.streaming.arrival import ShardOwners, block_bounds, decode_as_ready, decode_block_size, decode_timed
from mds_core.streaming.cache_limit import apply_cache_limit, parse_cache_limit
from mds_core.streaming.dataset_metrics import DatasetMetrics
from mds_core.streaming.epochs import CanonicalEpochs
from mds_core.streaming.jobdir import default_root, open_job
from mds_core.streaming.lineage import DataRecord, stream_root
from mds_core.streaming.local import LocalDataset, select
from mds_core.streaming.memory import return_freed_memory
from mds_core.streaming.prefetch import Prefetch, samples_ahead
from mds_core.streaming.ranged import RangedBlock
from mds_core.streaming.registry import apply_download_defaults, resolve_streams
from mds_core.streaming.resume import EpochLedger, check_versions, data_fingerprint, validate_state
from mds_core.streaming.scheduled import ScheduledEpochs
from mds_core.streaming.scheduled import fingerprint as scheduled_fingerprint
from mds_core.streaming.staged import ready, slices
from mds_core.streaming.stream import Stream
from mds_core.streaming.telemetry import WorkerMetrics
from mds_core.streaming.world import first_step_samples, freeze_inherited_heap, in_worker, rank_world

_ITER_CHUNK = 4096  # ids mapped to shards per numpy call while iterating
DELETION_CHECK_SECONDS = 0.5  # how often iteration looks for cached shards deleted under it
# The order settings among the constructor's arguments; the rest of OrderSpec comes from the streams or a resume.
_ORDER_SETTINGS = {field.name for field in fields(OrderSpec)} - {"shard_sizes", "weights"}


class StreamingDataset(DatasetMetrics):
    """Iterate one or more MDS streams in Mosaic Streaming's exact order, resumable mid-epoch.

    Arguments and defaults follow ``streaming.StreamingDataset``; what differs is in
    [Differences from Mosaic Streaming](differences.md#reading-streamingdataset). torch is not imported:
    the class becomes a virtual ``torch.utils.data.IterableDataset`` once torch is loaded, so import torch
    (or ``StreamingDataLoader``) before building a ``DataLoader`` on it.

    Args:
        streams: the streams to mix; else one stream is made from ``remote``/``local``/``split``.
        remote: the dataset's URL (any store fsspec opens) or a versioned shard set's root.
        local: the cache folder (yours alone); default ``<temp>/mds-<user>/cache/<hash>``.
        split: the subfolder of ``remote`` and ``local`` to read.
        download_retry: attempts per download after the first (default 2); streams may override it.
        download_timeout: seconds each download may take (default 60), a deadline on every store.
        validate_hash: a hash algorithm to check downloaded shards with; None checks none.
        keep_zip: keep the compressed shards in the cache beside the decompressed ones.
        epoch_size: samples per epoch (an int or a string like ``"10k"``); None: the streams' total.
        predownload: samples to fetch ahead per worker; default ``8 * batch_size``.
        cache_limit: the most bytes the cache may hold (``"50gb"`` too); checked against the shuffle.
        sampling_method: ``"balanced"`` or ``"fixed"``, how stream weights pick samples each epoch.
        sampling_granularity: samples taken from a shard at a time when sampling.
        partition_algo: how an epoch is split over nodes, ranks and workers (default ``"relaxed"``).
        num_canonical_nodes: the node count the order is computed for; default from the physical nodes.
        batch_size: the per-device batch size, the DataLoader's; needed before iterating.
        shuffle: shuffle the samples (default False).
        shuffle_algo: the shuffle algorithm, ``"py1e"`` by default.
        shuffle_seed: the seed of the shuffle and of the stream weights (default 9176).
        shuffle_block_size: samples per shuffle block; default from the canonical node count.
        batching_method: ``"random"``, ``"stratified"``, ``"per_stream"`` or ``"device_per_stream"``.
        allow_unsafe_types: read ``pkl`` columns (unpickling runs code the data chooses).
        replication: ranks that read the same samples (for tensor or sequence parallelism).
        stream_name: the ``streams_registry`` name that builds the stream from ``stream_config``.
        stream_config: keyword arguments for the registered stream.
        job_root: where the per-job folder goes; default ``$MDS_JOB_ROOT``, else the temp folder (ours).
        version: read this version of the [versioned shard set](versions.md) at ``remote`` (ours).
        telemetry: count each worker's samples, decode time and downloads for ``metrics`` (ours).
        schedule: a mixing ``Schedule`` whose weights change at given steps ([mixing](mixing.md), ours).
    """

    def __init__(
        self,
        *,
        streams: list[Stream] | None = None,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        download_retry: int = 2,
        download_timeout: float = 60.0,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        epoch_size: int | str | None = None,
        predownload: int | None = None,
        cache_limit: int | str | None = None,
        sampling_method: str = "balanced",
        sampling_granularity: int = 1,
        partition_algo: str = "relaxed",
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1e",
        shuffle_seed: int = 9176,
        shuffle_block_size: int | None = None,
        batching_method: str = "random",
        allow_unsafe_types: bool = False,
        replication: int | None = None,
        stream_name: str = "stream",
        stream_config: dict[str, Any] | None = None,
        job_root: str | None = None,
        version: int | None = None,
        telemetry: bool = True,
        schedule: Schedule | dict[str, Any] | None = None,
    ) -> None:
        order_settings = _order_settings(locals())  # first: before any other local is bound
        register_with_torch()
        self.streams = resolve_streams(streams, remote, local, split, stream_name, stream_config, version)
        self.data = DataRecord(self.streams)  # what state dicts name: roots, versions, lineage
        apply_download_defaults(self.streams, download_retry, download_timeout, validate_hash, keep_zip)
        self.batch_size, self.replication, self.shuffle_seed = batch_size, replication, shuffle_seed
        self.predownload = samples_ahead(predownload, batch_size)
        self.cache_limit = parse_cache_limit(cache_limit)
        self._rank_world = world = rank_world()  # once: it may ask every rank; a worker may have no group
        # The job directory first: its barrier lets each node's first rank fetch the indexes alone.
        self._job = open_job(job_root or default_root(), world, on_node_leader=self._fetch_indexes)
        self.readers = self._open_readers(allow_unsafe_types)
        self.order_spec = self._order_spec(order_settings)
        self._roots = [reader.root for reader in self.readers]
        self.scheduled = self._scheduled(schedule, world, epoch_size)
        self._epochs = self.scheduled or CanonicalEpochs(
            self._job, self.readers, self.order_spec, replication, shuffle_seed
        )
        self._write_back_weights()
        self._tabulate_shards()
        self._deletion_check_due = 0.0
        self._heap_checked_in: int | None = None  # the process whose inherited heap is frozen (see world.py)
        self.telemetry = telemetry
        self._worker_metrics: WorkerMetrics | None = None  # this process's counters, while it iterates
        self.fingerprint = self._fingerprint()
        self._limit_cache(world)

    @property
    def world(self) -> World:
        """This process's world: the rank's (found at construction) and, in a DataLoader worker, its worker."""
        return in_worker(self._rank_world)

    # ----------------------------------------------------------------------------------------------
    # sizes and random access

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch, over all devices, after stream weighting (whole global batches with a schedule)."""
        return self.scheduled.epoch_size if self.scheduled is not None else self.order_spec.samples_per_epoch

    @property
    def num_samples(self) -> int:
        """Samples in the underlying streams."""
        return self._stream_ends[-1]

    @property
    def size(self) -> int:
        """The number of samples, as the reference's ``size``."""
        return self.num_samples

    @property
    def shards(self) -> list[ShardInfo]:
        """Index entries of every shard, streams in order."""
        return [shard for reader in self.readers for shard in reader.shards]

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration of this rank starts (a loaded state's, if one is pending)."""
        ledger = EpochLedger(self._job, self.world.rank)
        pending, current = ledger.pending_state(), ledger.current()
        return pending["epoch"] if pending is not None else current["epoch"] + 1 if current else 0

    def __len__(self) -> int:
        """Samples this device sees per epoch, as in the reference: ceil(epoch size / parallel ranks)."""
        return math.ceil(self.epoch_size / self.world.replicate(self.replication).num_ranks)

    def __getitem__(self, index: Any) -> Any:
        return select(self.get_item, self.num_samples, index)

    def get_item(self, sample_id: int) -> dict[str, Any]:
        """The sample with global id ``sample_id``.

        Args:
            sample_id: the position over streams in order, then shards, then samples; negative counts
                from the end.
        """
        if sample_id < 0:
            sample_id += self.num_samples
        if not 0 <= sample_id < self.num_samples:
            raise SampleIndexError(f"sample id {sample_id} is out of range for {self.num_samples} samples")
        stream_id = bisect_right(self._stream_ends, sample_id)
        start = self._stream_ends[stream_id - 1] if stream_id else 0
        return self.readers[stream_id][sample_id - start]

    # ----------------------------------------------------------------------------------------------
    # iteration

    def __iter__(self) -> Iterator[dict[str, Any]]:
        register_with_torch()
        world = self.world
        self._heap_checked_in = freeze_inherited_heap(self._heap_checked_in)
        start = EpochLedger(self._job, world.rank).start_epoch(world.worker_of_rank)
        row = self._epochs.row(world, start.epoch, start.sample_in_epoch, start.state)
        self._worker_metrics = self._start_metrics(world)
        if not any(stream.remote for stream in self.streams):
            for _, ids in slices(row, _ITER_CHUNK):
                yield from self._samples(ids)
            return

        def shards_of(begin: int, end: int) -> np.ndarray:
            return np.searchsorted(self._shard_ends, row[begin:end], side="right")

        prefetch = Prefetch(self._shard_owners, shards_of, ready(row), first_step_samples(self.batch_size))
        step = max(1, min(_ITER_CHUNK, self.predownload))
        wait = True
        try:
            for begin, ids in slices(row, step):
                prefetch.up_to(begin + step + self.predownload)  # downloads run ahead, in sample order
                yield from self._samples(ids, refetch_deleted=True, first=not begin)
        except GeneratorExit:  # left early (``next(iter(ds))``, ``break``): running downloads end in the background
            wait = False
            raise
        finally:
            prefetch.stop(wait)

    def _samples(self, ids: np.ndarray, refetch_deleted: bool = False, first: bool = False) -> Iterator[dict[str, Any]]:
        """Samples for many ids: shards found for all of them at once, then straight to each shard's reader.

        With ``refetch_deleted`` (remote streams), a cached shard whose file was deleted since it was
        opened (evicted by another process, or by hand) is fetched again, as the reference does;
        reading on from the deleted file's memory map would keep its disk space in use. The check runs
        at most every ``DELETION_CHECK_SECONDS``, for the shards the current step reads. The ``first`` ids of an
        iteration are read by byte ranges from shards still on their way (``RangedBlock``).
        """
        shard_ids = np.searchsorted(self._shard_ends, ids, side="right")
        owners = self._shard_owners
        if refetch_deleted and (now := time.monotonic()) >= self._deletion_check_due:
            self._deletion_check_due = now + DELETION_CHECK_SECONDS  # a stat per shard per step costs ~5%
            for shard_id in np.unique(shard_ids).tolist():
                reader, shard_of_reader = owners[shard_id]
                reader.close_if_deleted(shard_of_reader)
        local_ids = ids - self._shard_starts[shard_ids]
        metrics = self._worker_metrics
        for number, (begin, end) in enumerate(block_bounds(len(ids), self._decode_block)):
            block_shards, block_ids = shard_ids[begin:end], local_ids[begin:end]
            if refetch_deleted:  # remote: hand samples out as their shards arrive, an iteration's first by ranges too
                ranged = RangedBlock(owners, block_shards, block_ids) if first and not number else None
                yield from decode_as_ready(owners, metrics, block_shards, block_ids, ranged)
            else:
                yield from decode_timed(owners, metrics, block_shards, block_ids)

    def __getstate__(self) -> dict[str, Any]:
        # A DataLoader worker gets no copy of this process's counters: it starts its own file.
        return {**self.__dict__, "_worker_metrics": None}

    # ----------------------------------------------------------------------------------------------
    # checkpoints

    def state_dict(self, num_samples: int, from_beginning: bool) -> dict[str, Any]:
        """Where training is in the epoch: the reference's five keys, a ``fingerprint`` and the ``data`` read.

        Args:
            num_samples: global samples consumed in this epoch (over every rank).
            from_beginning: whether ``num_samples`` counts since the epoch began; otherwise since this
                (possibly resumed) iteration started.
        """
        parallel_nodes = self.world.replicate(self.replication).num_nodes
        epoch, offset, base = EpochLedger(self._job, self.world.rank).position()
        sample_in_epoch = num_samples if from_beginning else offset + num_samples
        canonical = base["num_canonical_nodes"] if base else self.order_spec.canonical_nodes(parallel_nodes)
        state: dict[str, Any] = {
            "epoch": epoch,
            "sample_in_epoch": sample_in_epoch,
            "num_canonical_nodes": canonical,
            "shuffle_seed": base["shuffle_seed"] if base else self.shuffle_seed,
            "initial_physical_nodes": base["initial_physical_nodes"] if base else parallel_nodes,
            "fingerprint": self.fingerprint,
            "versions": self.versions,
            "data": self.data(),
        }
        if self.scheduled is not None:
            state["schedule"] = self.scheduled.state(epoch, sample_in_epoch, base, self._roots)
        return state

    def load_state_dict(self, obj: dict[str, Any], allow_other_data: bool = False) -> None:
        """Resume from ``obj`` at the next iteration of every worker of this rank.

        The state is checked now: a malformed state, or one taken on other data or settings
        (different fingerprint), raises ``ResumeError`` instead of silently restarting.

        Args:
            obj: a ``state_dict()`` saved earlier.
            allow_other_data: resume even though the data, a version or the order settings changed
                (the position is kept; which samples it points at may differ).
        """
        check_versions(obj, self.versions, allow_other_data, [stream_root(stream) for stream in self.streams])
        if self.scheduled is not None:
            obj = self.scheduled.resume(obj, self._roots, allow_other_data)
        state = validate_state(obj, self.fingerprint, self.epoch_size, allow_other_data)
        if state["epoch"] < 0:  # taken before any iteration: nothing to skip
            state.update(epoch=0, sample_in_epoch=0)
        EpochLedger(self._job, self.world.rank).load(state)

    # ----------------------------------------------------------------------------------------------
    # construction steps

    def _open_readers(self, allow_unsafe_types: bool) -> list[LocalDataset]:
        """Each stream's samples; a stream with none is refused, since no order can draw from it."""
        readers = [stream.open(allow_unsafe_types) for stream in self.streams]
        for stream, reader in zip(self.streams, readers):
            if not len(reader):
                raise EmptyStreamError(f"Stream contains no samples: {stream.index_source()}; drop it or write samples")
        return_freed_memory()  # what parsing the indexes freed (3 MiB at 10**4 shards), before workers fork
        return readers

    def _order_spec(self, settings: dict[str, Any]) -> OrderSpec:
        """The order's inputs: the streams' shard sizes and weights, and the constructor's order settings."""
        return OrderSpec(
            shard_sizes=[[shard.samples for shard in reader.shards] for reader in self.readers],
            weights=[stream.weights for stream in self.streams],
            **settings,
        )

    def _tabulate_shards(self) -> None:
        """Every shard of every stream in global order, so that iteration maps ids to shards in bulk."""
        self._stream_ends = list(accumulate(len(reader) for reader in self.readers))
        self._shard_owners = ShardOwners(self.readers)
        sizes = np.concatenate([reader.shard_samples for reader in self.readers])
        self._shard_ends = np.cumsum(sizes)
        self._shard_starts = self._shard_ends - sizes
        raw = sum(int(reader.shard_bytes.sum()) for reader in self.readers)
        self._decode_block = decode_block_size(raw, int(sizes.sum()))

    def _fingerprint(self) -> str:
        """What a resume state must have been taken on: the data and order settings, or the schedule's."""
        if self.scheduled is not None:
            return scheduled_fingerprint(self.order_spec, self.scheduled.global_batch)
        return data_fingerprint(self._roots, self.order_spec, self.versions)

    def _limit_cache(self, world: World) -> None:
        """Share ``cache_limit`` among the remote streams' shard caches, once the order is known."""
        if self.cache_limit is None:
            return
        parallel_nodes = world.replicate(self.replication).num_nodes
        apply_cache_limit(
            self.cache_limit, self.streams, self.readers, self.order_spec, parallel_nodes, world.ranks_per_node
        )

    def _scheduled(self, schedule: Any, world: World, epoch_size: int | str | None) -> ScheduledEpochs | None:
        if schedule is None:
            return None
        if not isinstance(schedule, Schedule):
            schedule = Schedule.from_json(schedule)  # its JSON form, as a state dict or a config file holds it
        return ScheduledEpochs.of_streams(
            schedule, self.streams, self.order_spec, world, self.batch_size, epoch_size, self.replication, self._job
        )

    def _fetch_indexes(self) -> None:
        for stream in self.streams:
            stream.fetch_index()

    def _write_back_weights(self) -> None:
        """As in the reference, each Stream ends up with its resolved proportion, repeat and choose."""
        mix = self.order_spec.mix
        for stream, choose, proportion, repeat in zip(self.streams, mix.choose, mix.proportion, mix.repeat):
            stream.choose, stream.proportion, stream.repeat = choose, proportion, repeat

    @property
    def versions(self) -> list[int | None]:
        """The shard-set version each stream reads (None: not a pinned version)."""
        return [stream.version for stream in self.streams]


def _order_settings(arguments: dict[str, Any]) -> dict[str, Any]:
    """The constructor's arguments that ``OrderSpec`` takes too: they share the reference's names."""
    return {name: value for name, value in arguments.items() if name in _ORDER_SETTINGS}


def register_with_torch() -> None:
    """Make ``StreamingDataset`` a ``torch.utils.data.IterableDataset`` if torch is loaded (idempotent)."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and not issubclass(StreamingDataset, torch_data.IterableDataset):
        torch_data.IterableDataset.register(StreamingDataset)


register_with_torch()
