"""``which``: the samples of a global batch, and the steps that saw a sample, from the indexes and the order alone.

Behind ``mds which``. The answer is the loader's by construction: the same ``generate_work`` (or a
scheduled run's work) and the same traversal (``mds_core.order.traversal``) that ``StreamingDataset``
and ``mds check-order`` use. Only ``index.json`` files (and, for a pinned shard-set version, its
manifest) are read; no shard is, unless the caller asks for key values (``key_values``), which
reads only the shards that hold the samples asked about.

Steps are counted from the resume point: step 0 is the first global batch a loader resumed at
``sample_in_epoch`` yields (the epoch's first batch without a resume).
"""

from __future__ import annotations

import dataclasses
import tempfile
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError, InvalidIndexError, SampleIndexError
from mds_core.format.index import INDEX_BASENAME, parse_index
from mds_core.order.simulate import WorkOf
from mds_core.order.spec import OrderSpec
from mds_core.order.traversal import to_global_batches
from mds_core.order.work import generate_work
from mds_core.order.world import World
from mds_core.storage.remote import open_store
from mds_core.streaming.stream import Stream
from mds_core.versions import resolve_version
from mds_core.versions.manifest import index_fingerprint


@dataclass(frozen=True)
class Source:
    """One stream's data: a folder or URL holding ``index.json``, or a shard set's root and a version."""

    location: str
    version: int | None = None


@dataclass(frozen=True)
class Seen:
    """Where a sample was read: the step (from the resume point), the global rank, its worker, the slot."""

    step: int
    rank: int
    worker: int
    slot: int  # the sample's position in the rank's batch


def shard_sizes(sources: Sequence[Source], storage_options: dict[str, Any] | None = None) -> list[list[int]]:
    """Each source's samples per shard, from its index alone (a pinned version's index is checked first).

    Args:
        sources: the streams, in order.
        storage_options: passed to the stores (credentials, endpoints).
    """
    sizes = []
    for source in sources:
        store = open_store(source.location, storage_options=storage_options)
        name = INDEX_BASENAME
        if source.version is not None:
            info = resolve_version(source.location, source.version, storage_options=storage_options)
            name = info.index
        text = store.read_bytes(name)
        if source.version is not None and index_fingerprint(text) != info.fingerprint:
            raise InvalidIndexError(
                f"{store.url_of(name)}: its fingerprint is {index_fingerprint(text)}, but version {source.version}'s "
                f"manifest records {info.fingerprint}: the index was replaced or damaged on the store"
            )
        sizes.append([shard.samples for shard in parse_index(text, store.url_of(name))])
    return sizes


def resumed(spec: OrderSpec, state: Mapping[str, Any]) -> OrderSpec:
    """The order a loader resumed from ``state`` (a state dict) follows, as ``CanonicalEpochs`` makes it.

    The state's canonical nodes, seed and initial node count; the streams are weighed with the
    constructor's seed (``spec.shuffle_seed``), as in the reference.

    Args:
        spec: the order settings the loader is built with.
        state: the state dict it resumes from.
    """
    return dataclasses.replace(
        spec,
        num_canonical_nodes=state["num_canonical_nodes"],
        shuffle_seed=state["shuffle_seed"],
        initial_physical_nodes=state["initial_physical_nodes"],
        weights_seed=spec.shuffle_seed,
    )


@dataclass(frozen=True)
class EpochOrder:
    """An epoch's global batches for a world, a per-device batch size and a resume point.

    Args:
        spec: the order settings (``resumed`` applies a state dict's).
        world: nodes, ranks per node and DataLoader workers per rank.
        batch_size: the per-device batch size (the DataLoader's).
        epoch: the epoch.
        sample_in_epoch: the resume point: global samples already consumed in the epoch.
        work_of: a scheduled run's work arrays instead of the reference's order.
    """

    spec: OrderSpec
    world: World
    batch_size: int
    epoch: int = 0
    sample_in_epoch: int = 0
    work_of: WorkOf | None = None

    @property
    def global_batch(self) -> int:
        """Samples per step over all ranks."""
        return self.batch_size * self.world.num_ranks

    @cached_property
    def batches(self) -> NDArray[np.int64]:
        """One row per step from the resume point, in rank order; ``-1`` marks padding."""
        world = self.world
        if self.work_of is not None:
            work = self.work_of(world, self.batch_size, self.epoch, self.sample_in_epoch)
            rows = to_global_batches(work, self.global_batch)
            return rows[rows[:, 0] >= 0]  # a row of -1 is a worker's batch fewer, not a padded batch
        spec = dataclasses.replace(self.spec, batch_size=self.batch_size)
        work = generate_work(
            spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank, self.epoch, self.sample_in_epoch
        )
        rows = to_global_batches(work, self.global_batch)
        return rows[(rows >= 0).any(axis=1)]  # a loader yields no batch of padding alone (the epoch's end)

    @property
    def steps(self) -> int:
        """Steps from the resume point to the epoch's end."""
        return len(self.batches)

    def batch(self, step: int) -> list[int]:
        """The sample ids of global batch ``step`` (from the resume point), rank 0's first; padding left out.

        Args:
            step: the global batch, counted from the resume point.
        """
        if not 0 <= step < self.steps:
            raise SampleIndexError(
                f"step {step} is beyond the epoch: {self.steps} global batches of {self.global_batch} "
                f"follow sample {self.sample_in_epoch} of epoch {self.epoch}"
            )
        row = self.batches[step]
        ids: list[int] = row[row >= 0].tolist()
        return ids

    def batch_by_rank(self, step: int) -> list[list[int]]:
        """Each global rank's sample ids in global batch ``step``, padding left out.

        Args:
            step: the global batch, counted from the resume point.
        """
        self.batch(step)  # refuses a step beyond the epoch
        rows: list[list[int]] = [row[row >= 0].tolist() for row in self.batches[step].reshape(-1, self.batch_size)]
        return rows

    def steps_of(self, sample_id: int) -> list[Seen]:
        """Every step (from the resume point) that reads sample ``sample_id``, with the rank and worker.

        Args:
            sample_id: a global sample id (streams in order, then shards, then samples).
        """
        total = sum(map(sum, self.spec.shard_sizes))
        if not 0 <= sample_id < total:
            raise SampleIndexError(f"sample id {sample_id} is out of range for {total} samples")
        steps, positions = np.nonzero(self.batches == sample_id)
        ranks_per_node, size = self.world.ranks_per_node, self.batch_size
        return [
            Seen(
                step=step,
                rank=position // (ranks_per_node * size) * ranks_per_node + position // size % ranks_per_node,
                worker=step % self.world.workers_per_rank,  # a resumed loader's workers start over at 0
                slot=position % size,
            )
            for step, position in zip(steps.tolist(), positions.tolist())
        ]


def key_values(
    sources: Sequence[Source], sample_ids: Sequence[int], column: str, cache: str | None = None
) -> list[Any]:
    """The ``column`` value of each sample: reads (and downloads) only the shards that hold them.

    Args:
        sources: the streams, in order, as ``shard_sizes`` read them.
        sample_ids: global sample ids.
        column: the key column (say, the source table's primary key).
        cache: where remote shards are downloaded; default a temporary folder, removed after.
    """
    with tempfile.TemporaryDirectory(prefix="mds-which-") as scratch:
        readers = [_stream(source, f"{cache or scratch}/{i}").open(False) for i, source in enumerate(sources)]
        ends = list(accumulate(len(reader) for reader in readers))
        values = []
        for sample_id in sample_ids:
            stream = bisect_right(ends, sample_id)
            sample = readers[stream][sample_id - (ends[stream - 1] if stream else 0)]
            if column not in sample:
                raise ConfigurationError(f"--key {column}: the dataset has no such column; it has {sorted(sample)}")
            values.append(sample[column])
        return values


def _stream(source: Source, cache: str) -> Stream:
    """The stream a loader would read ``source`` through, its index fetched."""
    local_folder = source.version is None and "://" not in source.location
    stream = (
        Stream(local=source.location)
        if local_folder
        else Stream(remote=source.location, local=cache, version=source.version)
    )
    stream.fetch_index()
    return stream
