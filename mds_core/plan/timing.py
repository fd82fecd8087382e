"""A model of when each training step can run: downloads through one link per node, steps in lockstep.

The assumptions (also in ``docs/planning.md``):

* Downloads begin ``startup`` seconds after iteration starts (0 for a stream whose client already
  read the index: ``plan_training`` passes none).
* A node's link carries ``bandwidth`` bytes/s, shared by all its downloads; each request also waits
  ``latency`` seconds, overlapped with other transfers.
* A shard is requested when training starts the step ``lead_steps`` before the step that needs it
  (``predownload`` samples ahead of each worker, plus the DataLoader's own prefetch).
* At the start every worker asks for its first shards, with as many in flight as it has download
  threads; the shards of each worker's first batch (the *heads*) download first, and the rest of the
  burst starts once the heads are in. Downloads started together share the link and finish together. A
  remote stream hands samples out as their shards arrive, so the first batch waits for the shards
  its own step reads: the heads alone when those are all it needs.
* Every rank runs the same step at the same time (gradient all-reduce): a step starts when the
  previous one is done (``step_seconds``) and every node has the shards the step reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class NodeFetches:
    """One node's fetches in an epoch: the step that needs each one, its bytes, and whether it is in the first burst."""

    needed_at: NDArray[np.int64]
    download_bytes: NDArray[np.int64]
    in_first_burst: NDArray[np.bool_]
    in_head: NDArray[np.bool_] | None = None  # in the burst, and read by a worker's first batch (first)


@dataclass(frozen=True)
class EpochTiming:
    """An epoch's modelled times: its length, and each node's wait for its first batch and its data."""

    seconds: float  # until the last step is done
    first_batch_seconds: list[float]  # per node: until the first step's data is there
    data_wait_seconds: list[float]  # per node: time its ranks wait for their own node's data


class _Link:
    """One node's downloads in the order they start, finishing one after another at the link's rate."""

    def __init__(
        self,
        fetches: NodeFetches,
        lead_steps: int,
        num_steps: int,
        bandwidth: float | None,
        latency: float,
        startup: float,
    ) -> None:
        head = fetches.in_head if fetches.in_head is not None else np.zeros(len(fetches.needed_at), bool)
        order = np.lexsort((fetches.needed_at, ~head, ~fetches.in_first_burst))
        self.needed_at = fetches.needed_at[order].tolist()
        self.seconds = (fetches.download_bytes[order] / bandwidth if bandwidth else np.zeros(len(order))).tolist()
        self.requested_at = [
            -1 if burst else step - lead_steps
            for step, burst in zip(self.needed_at, fetches.in_first_burst[order].tolist())
        ]
        self.latency, self.free_at, self.next = latency, startup, 0
        self.ready_by_step = [0.0] * (num_steps + 1)
        burst, heads = int(fetches.in_first_burst.sum()), int((head & fetches.in_first_burst).sum())
        if burst:  # the heads first, then the rest; each group shares the link and completes at once
            done = startup + latency + sum(self.seconds[:heads]) if heads else startup
            for index in range(heads):
                self._finish(index, done)
            if burst > heads:
                done += latency + sum(self.seconds[heads:burst])
                for index in range(heads, burst):
                    self._finish(index, done)
            self.free_at, self.next = done, burst

    def _finish(self, index: int, when: float) -> None:
        step = min(self.needed_at[index], len(self.ready_by_step) - 1)
        self.ready_by_step[step] = max(self.ready_by_step[step], when)

    def request_until(self, step: int, now: float) -> None:
        """Start every fetch requested by ``step``, which starts at ``now``."""
        while self.next < len(self.needed_at) and self.requested_at[self.next] <= step:
            self.free_at = max(self.free_at, now + self.latency) + self.seconds[self.next]
            self._finish(self.next, self.free_at)
            self.next += 1


def simulate_epoch(
    nodes: list[NodeFetches],
    num_steps: int,
    step_seconds: float,
    lead_steps: int,
    bandwidth: float | None,
    latency: float,
    startup: float = 0.0,
) -> EpochTiming:
    """Run the epoch's steps in lockstep over all nodes; see the module's assumptions."""
    links = [_Link(fetches, lead_steps, num_steps, bandwidth, latency, startup) for fetches in nodes]
    for link in links:
        link.request_until(0, 0.0)
    ready = [0.0] * len(links)
    waits = [0.0] * len(links)
    first_batch: list[float] = []
    done = 0.0
    for step in range(num_steps):
        for node, link in enumerate(links):
            ready[node] = max(ready[node], link.ready_by_step[step])
            waits[node] += max(0.0, ready[node] - done)
        start = max([done, *ready])
        if step == 0:
            first_batch = list(ready)
        done = start + step_seconds
        for link in links:
            link.request_until(step, start)
    return EpochTiming(seconds=done, first_batch_seconds=first_batch or [0.0] * len(links), data_wait_seconds=waits)


def bytes_before_first_batch(fetches: NodeFetches) -> int:
    """What the node downloads before its first step can run, whatever the link's speed.

    The model's order: the heads, then the rest of the first burst (each group completes at once),
    then the other fetches by the step that needs them. The first step waits for the group, or the
    fetch, that brings the last shard it reads.
    """
    step0 = fetches.needed_at == 0
    if not step0.any():
        return 0
    burst = fetches.in_first_burst
    head = burst & (fetches.in_head if fetches.in_head is not None else np.zeros(len(burst), bool))
    sizes = fetches.download_bytes
    if (step0 & ~burst).any():
        return int(sizes[burst].sum() + sizes[step0 & ~burst].sum())
    return int(sizes[burst].sum() if (step0 & ~head).any() else sizes[head].sum())


def request_window(predownload: int) -> int:
    """Samples a worker asks shards for at once.

    ``StreamingDataset`` reads ``min(predownload, 4096)`` samples per step and requests ``predownload`` samples beyond
    the step.
    """
    return predownload + max(1, min(4096, predownload))


def lead_steps(predownload: int, batch_size: int, workers_per_rank: int, prefetch_batches: int) -> int:
    """How many training steps before its first use a shard is requested."""
    batches_ahead = -(-request_window(predownload) // batch_size) + prefetch_batches
    return max(1, batches_ahead * workers_per_rank)
