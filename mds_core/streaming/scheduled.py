"""A ``StreamingDataset`` mixed by a ``Schedule``: epochs of whole global batches, rows per worker, states.

The run is one sequence of global batches (``mds_core.order.schedule``); an epoch is the next
``epoch_size // G`` of them, so the streams' passes continue across epochs. Parallel rank ``r`` takes
samples ``[r·b, (r+1)·b)`` of every global batch (``b`` the per-device batch), and worker ``w`` of
``W`` takes every ``W``-th of the rank's batches, in the order a DataLoader interleaves its workers.

A state dict's ``schedule`` entry says where the run is: the next step and how many samples each
stream (by name) has given. Resuming continues from there under the dataset's schedule, which may
differ from the one the state was taken under (an amended schedule applies from the resume step on),
with streams added (they start at their first sample) or dropped.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError, ResumeError
from mds_core.order.mixing import parse_epoch_size
from mds_core.order.schedule import Position, Schedule, ScheduledOrder, Shared
from mds_core.order.spec import OrderSpec
from mds_core.order.world import World
from mds_core.streaming.jobdir import JobDir
from mds_core.streaming.resume import index_digest
from mds_core.streaming.stream import Stream


class ScheduledEpochs:
    """The epochs of a schedule over streams ``names``, for ``world`` (``G`` = batch size x parallel ranks)."""

    def __init__(
        self,
        schedule: Schedule,
        names: Sequence[str],
        spec: OrderSpec,
        world: World,
        batch_size: int | None,
        epoch_size: int | str | None,
        replication: int | None = None,
        job: JobDir | None = None,
    ) -> None:
        if batch_size is None:
            raise ConfigurationError("a scheduled dataset needs batch_size: its phases count global batches")
        self.schedule, self.batch_size, self.replication = schedule, batch_size, replication
        self.global_batch = batch_size * world.replicate(replication).num_ranks
        self.order = ScheduledOrder(
            schedule,
            names,
            spec.shard_sizes,
            self.global_batch,
            shuffle=spec.shuffle,
            shuffle_algo=spec.shuffle_algo,
            shuffle_seed=spec.shuffle_seed,
            block_size=spec.block_size(1),
            shared=_shared_passes(job) if job is not None else None,
        )
        samples = parse_epoch_size(epoch_size) or sum(self.order.sizes)
        self.steps_per_epoch = samples // self.global_batch
        if not self.steps_per_epoch:
            raise ConfigurationError(
                f"an epoch of {samples} samples holds no whole global batch of {self.global_batch}: raise epoch_size"
            )

    @classmethod
    def of_streams(cls, schedule: Schedule, streams: Sequence[Stream], *args: Any) -> ScheduledEpochs:
        """For a dataset's streams, which the schedule tells apart by name and which carry no weights."""
        names = [stream.name for stream in streams]
        if len(set(names)) != len(names):
            raise ConfigurationError(
                f"a schedule tells streams apart by name, and these repeat: {names}; pass Stream(name=...)"
            )
        weighted = [stream.name for stream in streams if not stream.weights.is_unspecified]
        if weighted:
            raise ConfigurationError(
                f"streams {weighted} have proportion, repeat or choose: a schedule gives the weights"
            )
        return cls(schedule, names, *args)

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch of the schedule, over all ranks."""
        return self.steps_per_epoch * self.global_batch

    def step_of(self, epoch: int, sample_in_epoch: int) -> int:
        """The global step at ``sample_in_epoch`` of ``epoch``."""
        return max(epoch, 0) * self.steps_per_epoch + sample_in_epoch // self.global_batch

    def row(self, world: World, epoch: int, sample_in_epoch: int, base: Mapping[str, Any] | None) -> ScheduledRow:
        """This worker's sample ids for the rest of the epoch, from a state's ``schedule`` entry (or the start).

        They are computed as they are read: the first batch waits for no later pass of any stream.
        """
        batches = self._worker_batches(world.workers_per_rank, world.worker_of_rank, epoch, sample_in_epoch, base)
        b, rank = self.batch_size, world.replicate(self.replication).rank
        steps = len(
            range(
                self.step_of(epoch, sample_in_epoch) + world.worker_of_rank,
                (epoch + 1) * self.steps_per_epoch,
                world.workers_per_rank,
            )
        )
        return ScheduledRow((ids[rank * b : (rank + 1) * b] for ids in batches), steps * b)

    def work(
        self, world: World, epoch: int, sample_in_epoch: int = 0, base: Mapping[str, Any] | None = None
    ) -> np.ndarray:
        """Every worker's row in one ``(P, R, W, batches, B)`` array, -1 where a worker has a batch fewer.

        The shape ``mds_core.order.generate_work`` gives, for ``mds plan`` and ``mds check-order``. Each worker index's
        global batches are made once and sliced for every rank.
        """
        workers, b = world.workers_per_rank, self.batch_size
        per_worker = [
            np.array(list(self._worker_batches(workers, w, epoch, sample_in_epoch, base)), np.int64).reshape(
                -1, self.global_batch
            )
            for w in range(workers)
        ]
        shape = (world.num_nodes, world.ranks_per_node, workers)
        work = np.full((*shape, len(per_worker[0]), b), -1, np.int64)  # worker 0 has the most batches
        for n, r, w in np.ndindex(*shape):
            rank = dataclasses.replace(world, rank=n * shape[1] + r).replicate(self.replication).rank
            batches = per_worker[w]
            work[n, r, w, : len(batches)] = batches[:, rank * b : (rank + 1) * b]
        return work

    def _worker_batches(
        self, workers: int, worker: int, epoch: int, sample_in_epoch: int, base: Mapping[str, Any] | None
    ) -> Iterator[np.ndarray]:
        """The global batches DataLoader worker ``worker`` of ``workers`` reads for the rest of the epoch."""
        start = self.step_of(epoch, sample_in_epoch)
        position = self.order.advance(_position(base), start)
        end = (epoch + 1) * self.steps_per_epoch
        return (ids for _, ids in self.order.global_batches(position, end, workers, worker))

    def state(
        self, epoch: int, sample_in_epoch: int, base: Mapping[str, Any] | None, roots: Sequence[str]
    ) -> dict[str, Any]:
        """The ``schedule`` entry of a state dict taken at this point of the epoch.

        A stream the resumed state knew and this dataset lacks keeps its entries, so that it continues if it comes back.
        """
        position = self.order.advance(_position(base), self.step_of(epoch, sample_in_epoch))
        earlier = base.get("schedule", {}) if base else {}
        names = self.order.names
        return {
            "step": position.step,
            "given": {**_others(earlier.get("given", {}), names), **position.given},
            "global_batch_size": self.global_batch,
            "indexes": {**_others(earlier.get("indexes", {}), names), **dict(zip(names, map(index_hash, roots)))},
            "schedule": self.schedule.to_json(),
        }

    def resume(self, state: Mapping[str, Any], roots: Sequence[str], allow_other_data: bool) -> dict[str, Any]:
        """A loaded state's epoch and position in this dataset's epochs, after checking its ``schedule`` entry."""
        entry = state.get("schedule") if isinstance(state, Mapping) else None
        if (
            not isinstance(entry, Mapping)
            or not isinstance(entry.get("step"), int)
            or not isinstance(entry.get("given"), Mapping)
        ):
            raise ResumeError(
                "this dataset is scheduled, and the state dict has no 'schedule' entry: it was taken without one"
            )
        if entry.get("global_batch_size") != self.global_batch:
            raise ResumeError(
                f"the state was taken with a global batch of {entry.get('global_batch_size')} samples, and this run's is "
                f"{self.global_batch}: keep batch_size x ranks the same, so that the steps mean the same samples"
            )
        theirs = entry.get("indexes", {})
        changed = [n for n, root in zip(self.order.names, roots) if n in theirs and theirs[n] != index_hash(root)]
        if changed and not allow_other_data:
            raise ResumeError(
                f"streams {changed} hold other data than when the state was taken (their index.json changed); "
                "resume on the same data, or pass allow_other_data=True to load_state_dict"
            )
        step = entry["step"]
        epoch, steps_in = divmod(step, self.steps_per_epoch)
        return {**state, "epoch": epoch, "sample_in_epoch": steps_in * self.global_batch}


class ScheduledRow:
    """A worker's sample ids, made a batch at a time as slices reach them (the dataset reads forward)."""

    def __init__(self, batches: Iterator[np.ndarray], length: int) -> None:
        self._batches, self._length = batches, length
        self._parts: list[np.ndarray] = []
        self._ends: list[int] = []

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, span: slice) -> np.ndarray:
        start, stop, _ = span.indices(self._length)
        if stop <= start:
            return np.empty(0, np.int64)
        while (self._ends[-1] if self._ends else 0) < stop:
            part = next(self._batches)
            self._parts.append(part)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(part))
        first, last = bisect.bisect_right(self._ends, start), bisect.bisect_left(self._ends, stop)
        offset = self._ends[first - 1] if first else 0
        joined = np.concatenate(self._parts[first : last + 1])
        return joined[start - offset : stop - offset]


def fingerprint(spec: OrderSpec, global_batch: int) -> str:
    """A scheduled run's order settings; the streams are checked one by one (``ScheduledEpochs.resume``)."""
    settings = ["schedule", spec.shuffle, spec.shuffle_algo, spec.shuffle_block_size, global_batch]
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:16]


def index_hash(root: str) -> str:
    """A short hash of the ``index.json`` at ``root``, as a state's schedule entry records it."""
    return index_digest(root).hex()[:16]


def _others(entries: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {name: value for name, value in entries.items() if name not in names}


def _position(base: Mapping[str, Any] | None) -> Position:
    entry = base.get("schedule") if base else None
    return Position(entry["step"], entry["given"]) if entry else Position(0, {})


def _shared_passes(job: JobDir) -> Shared:
    """Each pass's permutation once per node, in the job directory; a stream's pass n - 2 is done with."""

    def shared(name: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        stream, number = name.rsplit("-", 1)
        job.remove_files(f"{stream}-{int(number) - 2}.", keep=set())
        return job.shared_array(name, compute)

    return shared
