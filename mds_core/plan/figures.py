"""The planner's results: plain dataclasses that render as JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Environment:
    """What the model needs to know about the hardware; every field is optional.

    * ``bandwidth``: bytes/s one node can download (all its ranks together).
    * ``latency``: seconds from a request to its first byte.
    * ``consume_seconds``: training time per sample on one rank (a step's time / batch size).
    * ``decode_seconds``: time one worker takes to read and decode a sample (``--probe`` measures it).
    * ``startup_seconds``: a new storage client's first request (session, credentials, connection;
      ``--probe`` measures it). Reported, not added to the model: the dataset pays it when it reads its
      index, and iteration reuses that client.
    """

    bandwidth: float | None = None
    latency: float = 0.0
    consume_seconds: float | None = None
    decode_seconds: float = 0.0
    startup_seconds: float = 0.0


@dataclass
class NodeEpoch:
    """One node in one epoch. Downloads and cache figures are exact without a cache limit."""

    node: int
    shards_downloaded: int
    bytes_downloaded: int
    refetched_shards: int  # shards fetched more than once in the epoch (LRU model, only with a limit)
    peak_cache_bytes: int
    first_batch_seconds: float | None = None  # modelled; None without bandwidth or consume time
    data_wait_fraction: float | None = None  # modelled: share of the epoch its ranks wait for data
    first_batch_bytes: int | None = None  # what it downloads before its first batch, at any link speed


@dataclass
class EpochFigures:
    """One epoch of a plan: each node's downloads and cache, and the modelled times."""

    epoch: int
    nodes: list[NodeEpoch]
    seconds: float | None = None  # modelled
    samples_per_second: float | None = None  # modelled, over all ranks


@dataclass
class Recommendation:
    """A setting the plan advises (``value`` None: keep yours), and why."""

    setting: str
    value: int | None
    reason: str


@dataclass
class TrainingPlan:
    """Everything ``mds plan`` reports; ``curves`` feed the plot (per node, sampled over the epochs)."""

    settings: dict[str, Any]
    epochs: list[EpochFigures]
    smallest_cache_limit: int  # per node: no shard fetched twice in an epoch
    working_set_bytes: int  # per node: the most bytes between their first and last use at once
    recommendations: list[Recommendation]
    plan_seconds: float = 0.0
    curves: dict[str, Any] = field(default_factory=dict)

    @property
    def refetched_shards(self) -> int:
        """Shard downloads repeated within an epoch, over every node and epoch (only with a limit)."""
        return sum(node.refetched_shards for epoch in self.epochs for node in epoch.nodes)

    def to_json(self, with_curves: bool = False) -> dict[str, Any]:
        """The figures as JSON, the per-step curves only if ``with_curves``."""
        data = dataclasses.asdict(self)
        if not with_curves:
            data.pop("curves")
        return data
