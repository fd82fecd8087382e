"""``StreamingDataset``: the reference's sample order over one or more MDS streams, resumable mid-epoch.

Each epoch's order is a pure function of the streams' shard sizes, the settings and the world
(``mds_core.order``). One process per node computes it and shares it through a memory-mapped file
in the job directory; each DataLoader worker then reads its own row and yields those samples.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from bisect import bisect_right
from itertools import accumulate
from typing import Any, Callable, Iterator

import numpy as np

from mds_core.streaming.jobdir import JobDir, default_root, new_job_token
from mds_core.errors import ConfigurationError, MDSError, SampleIndexError
from mds_core.format.index import INDEX_BASENAME
from mds_core.streaming.local import select
from mds_core.order import OrderSpec, generate_work
from mds_core.streaming.resume import STATE_KEYS, EpochLedger, ResumeError, validate_state
from mds_core.storage.cache_limit import check_cache_limit, shards_in_use
from mds_core.streaming.prefetch import Prefetch
from mds_core.streaming.stream import INHERITED, Stream
from mds_core.sizes import bytes_to_int
from mds_core.order.world import World
from mds_core.streaming.world import detect_world


_ITER_CHUNK = 4096  # ids mapped to shards per numpy call while iterating


class StreamingDataset:
    """Iterate one or more MDS streams in Mosaic Streaming's exact order. Arguments follow ``streaming.StreamingDataset``.

    Pass ``streams=[Stream(...), ...]`` or a single ``local=`` (and ``split=``). ``batch_size`` (the
    per-device batch size, equal to the DataLoader's) is needed before iterating. ``job_root`` (or
    ``$MDS_JOB_ROOT``) is where the per-job coordination directory goes; the default is the system
    temp directory.

    torch is not imported here (it takes seconds): the class is registered as a virtual subclass of
    ``torch.utils.data.IterableDataset`` as soon as torch is loaded, so ``DataLoader`` treats it as
    iterable. Import torch (or ``StreamingDataLoader``) before constructing the dataset, as training
    scripts do anyway.
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
    ) -> None:
        register_with_torch()
        if version is not None:
            stream_config = {**(stream_config or {}), "version": version}
        self.streams = _resolve_streams(streams, remote, local, split, stream_name, stream_config)
        defaults = {"download_retry": download_retry, "download_timeout": download_timeout,
                    "validate_hash": validate_hash, "keep_zip": keep_zip}
        for stream in self.streams:
            stream.apply_default(defaults)
        self.batch_size, self.replication, self.shuffle_seed = batch_size, replication, shuffle_seed
        self.predownload = predownload if predownload is not None else 8 * batch_size if batch_size else 64
        self.cache_limit = _parse_cache_limit(cache_limit)
        world = detect_world()
        # The job directory first: its barrier lets each node's first rank fetch the indexes alone.
        self._job = _open_job(job_root or default_root(), world, on_node_leader=self._fetch_indexes)
        self.readers = [stream.open(allow_unsafe_types) for stream in self.streams]
        for stream, reader in zip(self.streams, self.readers):
            if not len(reader):
                raise ConfigurationError(f"stream {stream.local!r} contains no samples: drop it or write samples")
        self.order_spec = OrderSpec(
            shard_sizes=[[shard.samples for shard in reader.shards] for reader in self.readers],
            weights=[stream.weights for stream in self.streams],
            epoch_size=epoch_size, shuffle=shuffle, shuffle_algo=shuffle_algo, shuffle_seed=shuffle_seed,
            num_canonical_nodes=num_canonical_nodes, shuffle_block_size=shuffle_block_size,
            sampling_method=sampling_method, sampling_granularity=sampling_granularity,
            partition_algo=partition_algo, batching_method=batching_method, batch_size=batch_size,
            replication=replication,
        )
        self._write_back_weights()
        self._stream_ends = list(accumulate(len(reader) for reader in self.readers))
        # Every shard of every stream in global order, so iteration maps ids to shards in bulk.
        self._shard_owners = [(reader, i) for reader in self.readers for i in range(len(reader.shards))]
        sizes = np.array([shard.samples for reader in self.readers for shard in reader.shards], np.int64)
        self._shard_ends = np.cumsum(sizes)
        self._shard_starts = self._shard_ends - sizes
        self.fingerprint = self._fingerprint()
        if self.cache_limit is not None:
            self._apply_cache_limit(world)

    # ----------------------------------------------------------------------------------------------
    # sizes and random access

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch, over all devices, after stream weighting."""
        return self.order_spec.samples_per_epoch

    @property
    def num_samples(self) -> int:
        """Samples in the underlying streams."""
        return self._stream_ends[-1]

    @property
    def size(self) -> int:
        return self.num_samples

    @property
    def shards(self) -> list:
        """Index entries of every shard, streams in order."""
        return [shard for reader in self.readers for shard in reader.shards]

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration of this rank starts (a loaded state's, if one is pending)."""
        ledger = EpochLedger(self._job, detect_world().rank)
        pending, current = ledger.pending_state(), ledger.current()
        if pending is not None:
            return pending["epoch"]
        return current["epoch"] + 1 if current else 0

    def __len__(self) -> int:
        """Samples this device sees per epoch, as in the reference: ceil(epoch size / parallel ranks)."""
        return math.ceil(self.epoch_size / detect_world().replicate(self.replication).num_ranks)

    def __getitem__(self, index: Any) -> Any:
        return select(self.get_item, self.num_samples, index)

    def get_item(self, sample_id: int) -> dict[str, Any]:
        """The sample with global id ``sample_id`` (streams in order, then shards, then samples)."""
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
        world = detect_world()
        start = EpochLedger(self._job, world.rank).start_epoch(world.worker_of_rank)
        row = self._work_row(world, start.epoch, start.sample_in_epoch, start.state)
        if not any(stream.remote for stream in self.streams):
            for begin in range(0, len(row), _ITER_CHUNK):
                yield from self._samples(row[begin : begin + _ITER_CHUNK])
            return
        prefetch = Prefetch(self._shard_owners, np.searchsorted(self._shard_ends, row, side="right"))
        step = max(1, min(_ITER_CHUNK, self.predownload))
        try:
            for begin in range(0, len(row), step):
                prefetch.up_to(begin + step + self.predownload)  # downloads run ahead, in sample order
                yield from self._samples(row[begin : begin + step])
        finally:
            prefetch.stop()

    def _samples(self, ids: np.ndarray) -> Iterator[dict[str, Any]]:
        """Samples for many ids: shards found for all of them at once, then straight to each shard's reader."""
        shard_ids = np.searchsorted(self._shard_ends, ids, side="right")
        local_ids = ids - self._shard_starts[shard_ids]
        owners = self._shard_owners
        for shard_id, local_id in zip(shard_ids.tolist(), local_ids.tolist()):
            reader, shard_of_reader = owners[shard_id]
            yield reader.shard_reader(shard_of_reader)[local_id]

    def _work_row(self, world: World, epoch: int, sample_in_epoch: int, state: dict | None) -> np.ndarray:
        """This worker's sample ids for the epoch, computed once per node and shared."""
        spec = self._spec_for(state, world)
        shape = f"{world.num_nodes}x{world.ranks_per_node}x{world.workers_per_rank}"
        key = f"work-e{epoch}-s{sample_in_epoch}-{shape}-{_short_hash(repr(spec))}"

        def compute() -> np.ndarray:
            self._job.remove_files(f"work-e{epoch - 2}-", keep=set())  # two epochs back is done everywhere
            return generate_work(spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank,
                                 epoch, sample_in_epoch)

        work = self._job.shared_array(key, compute)
        parallel = world.replicate(self.replication)
        row = np.asarray(work[parallel.node, parallel.rank_of_node, world.worker_of_rank]).ravel()
        return row[row >= 0]

    def _spec_for(self, state: dict | None, world: World) -> OrderSpec:
        """The order settings, with a resumed state's canonical nodes, seed and initial node count."""
        parallel_nodes = world.replicate(self.replication).num_nodes
        if state is None:
            return dataclasses.replace(
                self.order_spec, num_canonical_nodes=self.order_spec.canonical_nodes(parallel_nodes))
        return dataclasses.replace(
            self.order_spec,
            num_canonical_nodes=state["num_canonical_nodes"],
            shuffle_seed=state["shuffle_seed"],
            initial_physical_nodes=state["initial_physical_nodes"],
            weights_seed=self.shuffle_seed,  # the reference weighs streams once, with the constructor's seed
        )

    # ----------------------------------------------------------------------------------------------
    # checkpoints

    def state_dict(self, num_samples: int, from_beginning: bool) -> dict[str, Any]:
        """Where training is in the epoch: the reference's five keys plus a ``fingerprint`` of the data.

        ``num_samples`` counts global samples consumed in this epoch: since the epoch began if
        ``from_beginning``, else since this (possibly resumed) iteration started.
        """
        world = detect_world()
        parallel_nodes = world.replicate(self.replication).num_nodes
        ledger = EpochLedger(self._job, world.rank)
        pending, current = ledger.pending_state(), ledger.current()
        if pending is not None:
            epoch, offset, base = pending["epoch"], pending["sample_in_epoch"], pending
        elif current is not None:
            epoch, offset, base = current["epoch"], current["sample_in_epoch"], current["state"]
        else:
            epoch, offset, base = -1, 0, None
        state = {
            "epoch": epoch,
            "sample_in_epoch": num_samples if from_beginning else offset + num_samples,
            "num_canonical_nodes": base["num_canonical_nodes"] if base else self.order_spec.canonical_nodes(parallel_nodes),
            "shuffle_seed": base["shuffle_seed"] if base else self.shuffle_seed,
            "initial_physical_nodes": base["initial_physical_nodes"] if base else parallel_nodes,
            "fingerprint": self.fingerprint,
            "versions": self.versions,
        }
        return state

    def load_state_dict(self, obj: dict[str, Any], allow_other_data: bool = False) -> None:
        """Resume from ``obj`` at the next iteration of every worker of this rank.

        The state is checked now: a malformed state, or one taken on other data or settings
        (different fingerprint), raises ``ResumeError`` instead of silently restarting.
        """
        theirs = obj.get("versions") if isinstance(obj, dict) else None
        pinned = theirs is not None and any(v is not None for v in [*theirs, *self.versions])
        if pinned and theirs != self.versions and not allow_other_data:
            raise ResumeError(
                f"state dict was taken on shard-set version(s) {theirs}, but this dataset reads {self.versions}; "
                "resume on the same version, or pass allow_other_data=True to load_state_dict to continue anyway"
            )
        state = validate_state(obj, self.fingerprint, self.epoch_size, allow_other_data)
        if state["epoch"] < 0:  # taken before any iteration: nothing to skip
            state.update(epoch=0, sample_in_epoch=0)
        EpochLedger(self._job, detect_world().rank).load({key: state[key] for key in STATE_KEYS})

    # ----------------------------------------------------------------------------------------------

    def _fetch_indexes(self) -> None:
        for stream in self.streams:
            stream.fetch_index()

    def _apply_cache_limit(self, world: World) -> None:
        """Check the limit against the order, then share it among the remote streams by size."""
        remote = [(stream, reader) for stream, reader in zip(self.streams, self.readers) if stream.remote]
        if not remote:
            return  # a shard whose only copy is local is never evicted
        spec, nodes = self.order_spec, world.replicate(self.replication).num_nodes
        caches = [reader.shard_cache for _, reader in remote]
        shard_bytes = [cache.shard_bytes(i) for cache in caches for i in range(len(cache.shards))]
        in_use = shards_in_use(spec.shuffle, spec.shuffle_algo, spec.block_size(nodes),
                               [shard.samples for _, reader in remote for shard in reader.shards])
        index_bytes = sum(os.path.getsize(os.path.join(stream.root, INDEX_BASENAME)) for stream, _ in remote)
        order = f"shuffle={spec.shuffle}, shuffle_algo={spec.shuffle_algo!r}, block {spec.block_size(nodes):,}"
        check_cache_limit(self.cache_limit or 0, shard_bytes, index_bytes, in_use, world.ranks_per_node, order)
        total = sum(shard_bytes)
        for cache, (_, reader) in zip(caches, remote):
            share = sum(cache.shard_bytes(i) for i in range(len(cache.shards)))
            cache.cache_limit = (self.cache_limit or 0) * share // max(1, total)
            cache.threads = 2  # fewer shards in flight under a limit
            reader.max_open = in_use + 1

    def _write_back_weights(self) -> None:
        """As in the reference, each Stream ends up with its resolved proportion, repeat and choose."""
        mix = self.order_spec.mix
        for stream, choose, proportion, repeat in zip(self.streams, mix.choose, mix.proportion, mix.repeat):
            stream.choose, stream.proportion, stream.repeat = choose, proportion, repeat

    def _fingerprint(self) -> str:
        """Identifies the data and the order settings a state dict is only valid for."""
        digest = hashlib.sha256()
        for reader in self.readers:
            with open(os.path.join(reader.root, INDEX_BASENAME), "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
        spec = self.order_spec
        settings = [spec.mix.choose, spec.shuffle, spec.shuffle_algo, spec.shuffle_block_size, spec.sampling_method,
                    spec.sampling_granularity, spec.partition_algo, spec.batching_method, spec.replication]
        digest.update(json.dumps(settings).encode())
        digest.update(json.dumps(self.versions).encode())
        return digest.hexdigest()[:16]

    @property
    def versions(self) -> list[int | None]:
        """The shard-set version each stream reads (None: not a pinned version)."""
        return [stream.version for stream in self.streams]


def _resolve_streams(streams: list[Stream] | None, remote: str | None, local: str | None, split: str | None,
                     stream_name: str, stream_config: dict[str, Any] | None) -> list[Stream]:
    if stream_name != "stream":
        raise ConfigurationError(f"stream_name={stream_name!r}: only the built-in 'stream' is available")
    if streams is not None:
        if remote is not None or local is not None:
            raise ConfigurationError("pass either streams=[...] or remote=/local=, not both")
        if not streams or not all(isinstance(s, Stream) for s in streams):
            raise ConfigurationError("streams must be a non-empty list of mds_core.Stream")
        return list(streams)
    if remote is None and local is None:
        raise ConfigurationError("pass streams=[...] or local= (a dataset directory)")
    return [Stream(remote=remote, local=local, split=split, **(stream_config or {}))]


def _open_job(root: str, world: World, on_node_leader: Callable[[], None]) -> JobDir:
    """The job directory: created by each node's first rank, its name agreed over torch.distributed.

    ``on_node_leader`` runs on each node's first rank before the others go on (index downloads).
    """
    if world.num_ranks == 1:
        job = JobDir.create(root, new_job_token())
        on_node_leader()
        return job
    import torch.distributed as dist

    started_here = not dist.is_initialized()
    if started_here:
        if not os.environ.get("MASTER_ADDR") or not os.environ.get("MASTER_PORT"):
            raise ConfigurationError(
                "WORLD_SIZE > 1 but torch.distributed is not initialized and MASTER_ADDR/MASTER_PORT are not "
                "set: launch with torchrun or call torch.distributed.init_process_group first")
        dist.init_process_group("gloo", rank=world.rank, world_size=world.num_ranks)
    try:
        token = [new_job_token() if world.rank == 0 else None]
        dist.broadcast_object_list(token, src=0)
        job = JobDir.create(root, token[0]) if world.rank_of_node == 0 else None
        failure = None
        if job is not None:
            try:
                on_node_leader()
            except Exception as err:  # reach the barrier anyway, so the other ranks do not hang
                failure = err
        dist.barrier()
        if failure is not None:
            raise failure
        return job or JobDir.attach(root, token[0])
    finally:
        if started_here:
            dist.destroy_process_group()


def _parse_cache_limit(cache_limit: int | str | None) -> int | None:
    if not cache_limit:
        return None
    try:
        return bytes_to_int(cache_limit)
    except MDSError as err:
        raise ConfigurationError(f"cache_limit: {err}") from None


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def register_with_torch() -> None:
    """Make ``StreamingDataset`` a ``torch.utils.data.IterableDataset`` if torch is loaded (idempotent)."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and not issubclass(StreamingDataset, torch_data.IterableDataset):
        torch_data.IterableDataset.register(StreamingDataset)


register_with_torch()
