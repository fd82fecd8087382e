"""OrderSpec: everything a sample order depends on, apart from the world and the epoch.

A StreamingDataset builds one from its arguments and its streams' shard sizes; ``generate_work``
turns it, a world and an epoch into that epoch's sample ids. Defaults follow Mosaic Streaming 0.13
(``docs/ordering.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int
from mds_core.order.mixing import StreamMix, StreamWeights, apply_weights, check_sampling_method, parse_epoch_size
from mds_core.order.partition import PARTITION_ALGOS
from mds_core.order.shuffle import SHUFFLE_ALGOS

BATCHING_METHODS = ("random", "stratified", "per_stream", "device_per_stream")
# Shuffles that keep one shard per canonical node resident default to many canonical nodes.
_SHARD_AT_A_TIME_ALGOS = ("py1s", "py2s")


@dataclass(frozen=True)
class OrderSpec:
    """The order-relevant settings of a dataset; reference argument names and defaults.

    * ``shard_sizes``: samples per shard, one list per stream, streams and shards in index order.
    * ``weights``: one entry per stream (a :class:`StreamWeights`, a mapping with ``proportion`` /
      ``repeat`` / ``choose``, a Stream-like object, or ``None``); empty means every stream unweighted.
    * ``num_canonical_nodes`` / ``shuffle_block_size``: ``None`` (or a canonical node count of 0, as
      in the reference) takes the default for the physical node count, see :meth:`canonical_nodes`
      and :meth:`block_size`. A resumed run passes the state's values instead.
    * ``initial_physical_nodes``: the first run's node count, from a resume state; ``None`` on a fresh run.
    * ``weights_seed``: the seed stream weights were applied with. The reference applies weights once,
      at construction, with the constructor's ``shuffle_seed``, and keeps them when a resume state
      later replaces ``shuffle_seed``; ``None`` means ``shuffle_seed``.
    """

    shard_sizes: Sequence[Sequence[int]]
    weights: Sequence[Any] = ()
    epoch_size: int | str | None = None
    shuffle: bool = False
    shuffle_algo: str = "py1e"
    shuffle_seed: int = 9176
    num_canonical_nodes: int | None = None
    shuffle_block_size: int | None = None
    sampling_method: str = "balanced"
    sampling_granularity: int = 1
    partition_algo: str = "relaxed"
    batching_method: str = "random"
    batch_size: int | None = None
    initial_physical_nodes: int | None = None
    replication: int | None = None
    weights_seed: int | None = None

    def __post_init__(self) -> None:
        shard_sizes = _normalize_shard_sizes(self.shard_sizes)
        object.__setattr__(self, "shard_sizes", shard_sizes)
        object.__setattr__(self, "weights", _normalize_weights(self.weights, len(shard_sizes)))
        object.__setattr__(self, "epoch_size", parse_epoch_size(self.epoch_size))
        self._check_choices()
        self._check_numbers()
        _ = self.mix  # apply the weights now, so bad weights fail at construction as in the reference

    # ----------------------------------------------------------------------------------------------
    # validation

    def _check_choices(self) -> None:
        _check_choice("shuffle_algo", self.shuffle_algo, SHUFFLE_ALGOS)
        _check_choice("partition_algo", self.partition_algo, PARTITION_ALGOS)
        _check_choice("batching_method", self.batching_method, BATCHING_METHODS)
        check_sampling_method(self.sampling_method)
        if not isinstance(self.shuffle, (bool, np.bool_)):
            raise ConfigurationError(f"shuffle must be True or False, got {self.shuffle!r}")

    def _check_numbers(self) -> None:
        _check_int("shuffle_seed", self.shuffle_seed, minimum=0)
        _check_int("sampling_granularity", self.sampling_granularity, minimum=1)
        _check_int("num_canonical_nodes", self.num_canonical_nodes, minimum=0, optional=True)
        _check_int("shuffle_block_size", self.shuffle_block_size, minimum=0, optional=True)
        _check_int("initial_physical_nodes", self.initial_physical_nodes, minimum=1, optional=True)
        _check_int("replication", self.replication, minimum=1, optional=True)
        _check_int("weights_seed", self.weights_seed, minimum=0, optional=True)
        if self.batch_size is not None:
            check_batch_size(self.batch_size)

    # ----------------------------------------------------------------------------------------------
    # derived values

    @property
    def num_streams(self) -> int:
        """How many streams the order covers."""
        return len(self.shard_sizes)

    @property
    def stream_sizes(self) -> tuple[int, ...]:
        """Each stream's number of samples."""
        return tuple(sum(sizes) for sizes in self.shard_sizes)

    @cached_property
    def mix(self) -> StreamMix:
        """Per-stream choose / proportion / repeat, as the reference derives them at construction."""
        seed = self.shuffle_seed if self.weights_seed is None else self.weights_seed
        epoch_size = parse_epoch_size(self.epoch_size)  # parsed in __post_init__ already: the same int or None
        return apply_weights(self.stream_sizes, self.weights, epoch_size, seed)

    @property
    def samples_per_epoch(self) -> int:
        """The resolved epoch size: samples in one epoch after weighting (the reference's ``epoch_size``)."""
        return self.mix.epoch_size

    def canonical_nodes(self, physical_nodes: int) -> int:
        """``num_canonical_nodes``, or its default for this many (replication-adjusted) nodes."""
        if self.num_canonical_nodes:
            return self.num_canonical_nodes
        if self.shuffle_algo in _SHARD_AT_A_TIME_ALGOS:
            return 64 * physical_nodes
        return physical_nodes

    def block_size(self, physical_nodes: int) -> int:
        """``shuffle_block_size``, or ``max(4_000_000 // C, 1 << 18)`` with C from :meth:`canonical_nodes`."""
        if self.shuffle_block_size is not None:
            return self.shuffle_block_size
        return max(4_000_000 // self.canonical_nodes(physical_nodes), 1 << 18)


def _normalize_shard_sizes(shard_sizes: Any) -> tuple[tuple[int, ...], ...]:
    if isinstance(shard_sizes, (str, bytes)) or not isinstance(shard_sizes, Sequence) or not shard_sizes:
        raise ConfigurationError("shard_sizes must list each stream's shard sizes, e.g. [[100, 100], [50]]")
    streams = []
    for stream_id, sizes in enumerate(shard_sizes):
        sizes = np.asarray(sizes)
        if sizes.ndim != 1 or (sizes.size and not np.issubdtype(sizes.dtype, np.integer)) or np.any(sizes < 0):
            raise ConfigurationError(
                f"stream {stream_id}: shard sizes must be a list of non-negative integers, got {sizes.tolist()!r}"
            )
        if int(sizes.sum()) == 0:
            raise ConfigurationError(
                f"stream {stream_id} contains no samples: check its index.json or remove the stream"
            )
        streams.append(tuple(int(n) for n in sizes))
    return tuple(streams)


def _normalize_weights(weights: Any, num_streams: int) -> tuple[StreamWeights, ...]:
    if weights is None or len(weights) == 0:
        return (StreamWeights(),) * num_streams
    if len(weights) != num_streams:
        raise ConfigurationError(f"got weights for {len(weights)} streams but shard sizes for {num_streams}")
    return tuple(StreamWeights.of(w) for w in weights)


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigurationError(f"invalid {name} {value!r}: use one of {', '.join(choices)}")


def _check_int(name: str, value: Any, *, minimum: int, optional: bool = False) -> None:
    if value is not None or not optional:
        as_int(name, value, minimum)


def check_batch_size(batch_size: Any) -> int:
    """The per-device batch size, which order needs and which must equal the DataLoader's."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigurationError(
            f"batch_size must be a positive integer (the per-device batch size, the same as the "
            f"DataLoader's), got {batch_size!r}: pass batch_size to StreamingDataset"
        )
    return int(batch_size)
