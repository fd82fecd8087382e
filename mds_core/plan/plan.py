"""``plan_training``: a training world's downloads, cache and data stalls, from the real per-rank order.

The exact part replays what every node reads (``reads``) through its cache (``cache``); the
modelled part turns the fetches into time (``timing``). Recommendations follow from both.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.format.index import ShardInfo, dumps_index
from mds_core.order import OrderSpec, generate_work
from mds_core.order.schedule import Schedule
from mds_core.order.world import World
from mds_core.plan.cache import LRUCache, live_bytes, smallest_limit_without_refetch
from mds_core.plan.figures import Environment, EpochFigures, NodeEpoch, Recommendation, TrainingPlan
from mds_core.plan.reads import node_reads
from mds_core.plan.recommend import PREDOWNLOAD_BATCHES, recommend
from mds_core.plan.timing import NodeFetches, bytes_before_first_batch, lead_steps, request_window, simulate_epoch
from mds_core.storage.download_threads import download_threads
from mds_core.streaming.cache_limit import cache_limit_needed, readers_at_once, shards_in_use
from mds_core.streaming.memory import check_order_fits
from mds_core.streaming.prefetch import samples_ahead
from mds_core.streaming.scheduled import ScheduledEpochs

_CURVE_POINTS = 1000
_PREFETCH_BATCHES = 2  # torch DataLoader's default prefetch_factor


@dataclasses.dataclass(frozen=True)
class Shards:
    """Every shard of every stream, in global order, with what it costs to download and to keep."""

    ends: NDArray[np.int64]
    download: NDArray[np.int64]
    cached: NDArray[np.int64]

    @classmethod
    def of(cls, streams: Sequence[Sequence[ShardInfo]], keep_zip: bool) -> Shards:
        """The shards of all streams in order, with their download, cache and sample figures."""
        shards = [shard for stream in streams for shard in stream]
        download = [(s.zip_data or s.raw_data).bytes for s in shards]
        cached = [s.raw_data.bytes + (s.zip_data.bytes if s.zip_data and keep_zip else 0) for s in shards]
        ends = np.cumsum([s.samples for s in shards], dtype=np.int64)
        return cls(ends, np.array(download, np.int64), np.array(cached, np.int64))


@dataclasses.dataclass
class _Timer:
    """Re-times an epoch's fetches for any ``predownload``: the lead and each worker's first burst change.

    The fetches come from the cache replay with the planned ``predownload``. Under a cache limit,
    another ``predownload`` would also change which shards are fetched again; re-timing leaves that out.
    """

    world: World
    batch_size: int
    threads: int
    samples: int
    environment: Environment
    num_steps: int = 0
    nodes: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = dataclasses.field(
        default_factory=list
    )

    def keep(
        self, node_work: NDArray[np.int64], shards: Shards, steps: NDArray[np.int64], fetched: NDArray[np.int64]
    ) -> None:
        ranks, workers = node_work.shape[:2]
        self.num_steps = int(node_work.shape[1] * node_work.shape[2])
        window = request_window(max(PREDOWNLOAD_BATCHES) * self.batch_size)
        firsts = node_work.reshape(ranks, workers, -1)[:, :, :window]
        first_shards = np.where(firsts >= 0, np.searchsorted(shards.ends, firsts, side="right"), -1)
        self.nodes.append((steps, fetched, shards.download[fetched], first_shards))

    def epoch(self, figures: EpochFigures, predownload: int) -> EpochFigures:
        """Fill in what each node downloads before its first batch, and the modelled figures.

        The figures only when the environment says enough to model time.
        """
        env = self.environment
        lead = lead_steps(predownload, self.batch_size, self.world.workers_per_rank, _PREFETCH_BATCHES)
        fetches = []
        for steps, fetched, sizes, first_shards in self.nodes:
            burst = _first_burst(first_shards[:, :, : request_window(predownload)], self.threads)
            first_fetch = np.zeros(len(fetched), bool)
            first_fetch[np.unique(fetched, return_index=True)[1]] = True  # a refetch is never in the first burst
            in_burst = np.isin(fetched, burst) & (steps <= lead) & first_fetch
            # A worker's first batch needs every shard of its samples: those download first, together.
            heads = np.isin(fetched, _first_burst(first_shards[:, :, : self.batch_size], self.threads)) & in_burst
            fetches.append(NodeFetches(steps, sizes, in_burst, heads))
        for node, node_fetches in zip(figures.nodes, fetches):
            node.first_batch_bytes = bytes_before_first_batch(node_fetches)
        if env.bandwidth is None and env.consume_seconds is None:
            return figures
        step = self.batch_size * max(env.consume_seconds or 0.0, env.decode_seconds / self.world.workers_per_rank)
        # No startup: iteration downloads through the client the dataset made to read its index (a forked
        # worker's own client reuses the inherited session: milliseconds). The probe still reports it.
        timing = simulate_epoch(fetches, self.num_steps, step, lead, env.bandwidth, env.latency)
        figures.seconds = timing.seconds
        figures.samples_per_second = self.samples / timing.seconds if timing.seconds > 0 else None
        for node, wait, first in zip(figures.nodes, timing.data_wait_seconds, timing.first_batch_seconds):
            node.first_batch_seconds = first
            node.data_wait_fraction = wait / timing.seconds if timing.seconds > 0 else 0.0
        return figures


def plan_training(
    streams: Sequence[Sequence[ShardInfo]],
    world: World,
    batch_size: int,
    *,
    epochs: int = 1,
    predownload: int | None = None,
    cache_limit: int | None = None,
    keep_zip: bool = False,
    environment: Environment | None = None,
    schedule: Schedule | None = None,
    stream_names: Sequence[str] | None = None,
    **order: Any,
) -> TrainingPlan:
    """Plan ``epochs`` epochs of the streams (each a list of index entries) on ``world``.

    Args:
        streams: each stream's shards, as its ``index.json`` lists them.
        world: nodes, ranks per node and DataLoader workers per rank.
        batch_size: samples per rank per step, as the loader's ``batch_size``.
        epochs: how many epochs to replay; each draws its own order.
        predownload: samples each worker reads ahead; defaults to the loader's (``8 * batch_size``).
        cache_limit: bytes the cache may hold per node; ``None`` plans without eviction.
        keep_zip: whether each shard's compressed form stays in the cache beside the decompressed one.
        environment: bandwidth and per-sample cost, for the time estimates; the default has none.
        schedule: a mixing schedule (``docs/mixing.md``); the plan then follows its phases.
        stream_names: the streams' names as the schedule's phases give them.
        **order: ``StreamingDataset``'s order settings (``shuffle``, ``shuffle_algo``, ``shuffle_seed``,
            ``shuffle_block_size``, ``num_canonical_nodes``, ``partition_algo``, ``batching_method``, ...).

    Returns:
        The plan: bytes, downloads and evictions per node, the first batch's wait and recommendations.
    """
    began = time.perf_counter()
    environment = environment or Environment()
    _check_plannable(epochs, order)
    spec = OrderSpec(shard_sizes=[[s.samples for s in stream] for stream in streams], batch_size=batch_size, **order)
    shards = Shards.of(streams, keep_zip)
    predownload = predownload or samples_ahead(None, batch_size)
    lead = lead_steps(predownload, batch_size, world.workers_per_rank, _PREFETCH_BATCHES)
    replays = _Replays.of(shards, lead, cache_limit, world.num_nodes)
    check_order_fits(spec.samples_per_epoch, 0, functools.partial(_largest_claim, streams))
    scheduled, samples = _scheduled(schedule, stream_names, spec, world, batch_size)
    figures, first_timer = [], None
    for epoch in range(epochs):
        timer = _Timer(world, batch_size, download_threads(cache_limit), samples, environment)
        nodes = replays.epoch(_work(spec, world, scheduled, epoch), timer)  # the epoch's work is freed here
        figures.append(timer.epoch(EpochFigures(epoch, nodes), predownload))
        first_timer = first_timer or timer  # later epochs' fetches are not kept
    settings = {
        "world": str(world),
        "batch_size": batch_size,
        "epochs": epochs,
        "predownload": predownload,
        "cache_limit": cache_limit,
        "keep_zip": keep_zip,
        **_derived_settings(streams, shards, spec, world, samples, schedule, lead, environment),
    }
    plan = TrainingPlan(settings, figures, replays.smallest, replays.working_set, [], curves=_sampled(replays.curves))
    plan.recommendations = _recommendations(plan, first_timer, streams, shards, spec, world)
    plan.plan_seconds = time.perf_counter() - began
    return plan


def _check_plannable(epochs: int, order: dict[str, Any]) -> None:
    """Refuse what the planner does not model, before any work."""
    if epochs < 1:
        raise ConfigurationError(f"epochs must be >= 1, got {epochs}")
    if order.get("replication") not in (None, 1):
        raise ConfigurationError(
            "plan does not model replication yet: plan the world of parallel ranks instead "
            "(nodes x ranks / replication)"
        )


def _scheduled(
    schedule: Schedule | None, stream_names: Sequence[str] | None, spec: OrderSpec, world: World, batch_size: int
) -> tuple[ScheduledEpochs | None, int]:
    """The mixing schedule's epochs, as the loader makes them (None without a schedule), and the samples per epoch."""
    if schedule is None:
        return None, spec.samples_per_epoch
    scheduled = ScheduledEpochs(schedule, stream_names or [], spec, world, batch_size, spec.epoch_size)
    return scheduled, scheduled.epoch_size


def _work(spec: OrderSpec, world: World, scheduled: ScheduledEpochs | None, epoch: int) -> NDArray[np.int64]:
    """Every sample id the world reads in ``epoch``: (nodes, ranks per node, workers, batches, batch)."""
    if scheduled is not None:
        return scheduled.work(world, epoch)
    return generate_work(spec, world.num_nodes, world.ranks_per_node, world.workers_per_rank, epoch)


@dataclasses.dataclass
class _Replays:
    """Each node's cache over the epochs: what it fetches, and the largest limits and working sets seen."""

    shards: Shards
    lead: int
    caches: list[LRUCache]
    smallest: int = 0
    working_set: int = 0
    curves: dict[str, list[list[int]]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.curves = {"footprint": [[] for _ in self.caches], "downloaded": [[] for _ in self.caches]}

    @classmethod
    def of(cls, shards: Shards, lead: int, cache_limit: int | None, num_nodes: int) -> _Replays:
        """A fresh cache of ``cache_limit`` bytes (None: no limit) on each of ``num_nodes`` nodes."""
        return cls(shards, lead, [LRUCache(shards.cached, shards.download, cache_limit) for _ in range(num_nodes)])

    def epoch(self, work: NDArray[np.int64], timer: _Timer) -> list[NodeEpoch]:
        """Replay one epoch's ``work`` through every node's cache; ``timer`` keeps the fetches to time them."""
        shards, nodes = self.shards, []
        for node, cache in enumerate(self.caches):
            reads = node_reads(work, node, shards.ends)
            replay = cache.replay(reads, self.lead)
            no_refetch = smallest_limit_without_refetch(reads, shards.cached, shards.download, self.lead)
            self.smallest = max(self.smallest, no_refetch)
            self.working_set = max(self.working_set, int(live_bytes(reads, shards.cached).max(initial=0)))
            timer.keep(
                work[node], shards, np.array(replay.fetch_steps, np.int64), np.array(replay.fetch_shards, np.int64)
            )
            nodes.append(
                NodeEpoch(node, replay.fetched_shards, replay.fetched_bytes, replay.refetched_shards, replay.peak_bytes)
            )
            self.curves["footprint"][node] += replay.footprint
            self.curves["downloaded"][node] += replay.downloaded
        return nodes


def _derived_settings(
    streams: Sequence[Sequence[ShardInfo]],
    shards: Shards,
    spec: OrderSpec,
    world: World,
    samples: int,
    schedule: Schedule | None,
    lead: int,
    environment: Environment,
) -> dict[str, Any]:
    """The plan's settings that follow from the order, the data and the environment."""
    return {
        "num_canonical_nodes": spec.canonical_nodes(world.num_nodes),
        "shuffle_block_size": spec.block_size(world.num_nodes),
        "shuffle": spec.shuffle,
        "shuffle_algo": spec.shuffle_algo,
        "samples_per_epoch": samples,
        "schedule": schedule.to_json() if schedule is not None else None,
        "shards": len(shards.ends),
        "dataset_bytes": int(shards.download.sum()),
        "lead_steps": lead,
        "environment": dataclasses.asdict(environment),
        "loader_minimum_cache_limit": _loader_minimum(streams, shards, spec, world, spec.block_size(world.num_nodes)),
    }


def _recommendations(
    plan: TrainingPlan,
    first_timer: _Timer | None,
    streams: Sequence[Sequence[ShardInfo]],
    shards: Shards,
    spec: OrderSpec,
    world: World,
) -> list[Recommendation]:
    """``recommend``, re-timing the first epoch for other ``predownload`` values and re-checking other blocks."""

    def first_epoch_seconds(other: int) -> float | None:
        blank = EpochFigures(0, [NodeEpoch(n, 0, 0, 0, 0) for n in range(world.num_nodes)])
        return first_timer.epoch(blank, other).seconds if first_timer else None

    def loader_minimum_with(block: int) -> int:
        return _loader_minimum(streams, shards, spec, world, block)

    return recommend(plan, first_epoch_seconds, loader_minimum_with)


def _loader_minimum(
    streams: Sequence[Sequence[ShardInfo]], shards: Shards, spec: OrderSpec, world: World, block: int
) -> int:
    """The smallest ``cache_limit`` ``StreamingDataset`` accepts for this order with shuffle block ``block``.

    As ``check_cache_limit`` computes it.
    """
    in_use = shards_in_use(
        spec.shuffle, spec.shuffle_algo, block, [shard.samples for stream in streams for shard in stream]
    )
    index_bytes = sum(len(dumps_index(list(stream)).encode()) for stream in streams)
    readers = readers_at_once(spec, world.num_nodes, world.ranks_per_node)
    return cache_limit_needed(shards.cached.tolist(), index_bytes, in_use, readers)[1]


def _largest_claim(streams: Sequence[Sequence[ShardInfo]]) -> str:
    count, stream, shard = max((s.samples, i, j) for i, entries in enumerate(streams) for j, s in enumerate(entries))
    return f"stream {stream}, shard {shard} claims the most ({count:,} samples)"


def _first_burst(first_shards: NDArray[np.int64], threads: int) -> NDArray[np.int64]:
    """The shards each worker of the node asks for first, as many as it downloads at once."""
    first: set[int] = set()
    for row in first_shards.reshape(-1, first_shards.shape[-1]):
        row = row[row >= 0]
        unique, where = np.unique(row, return_index=True)
        first.update(unique[np.argsort(where)][:threads].tolist())
    return np.array(sorted(first), np.int64)


def _sampled(curves: dict[str, list[list[int]]]) -> dict[str, Any]:
    """At most ``_CURVE_POINTS`` points per node, so JSON and plots stay small."""
    total = len(curves["footprint"][0]) if curves["footprint"] else 0
    picks = np.unique(np.linspace(0, max(total - 1, 0), min(total, _CURVE_POINTS)).astype(np.int64)).tolist()
    return {
        "step": picks,
        **{name: [[node[i] for i in picks] for node in per_node] for name, per_node in curves.items()},
    }
