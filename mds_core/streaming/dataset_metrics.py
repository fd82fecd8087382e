"""``StreamingDataset.metrics``: each DataLoader worker's counters, which it keeps in the job directory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mds_core.order.world import World
from mds_core.streaming.jobdir import JobDir
from mds_core.streaming.local import LocalDataset
from mds_core.streaming.telemetry import WorkerMetrics, clear, read_workers, totals


class DatasetMetrics:
    """The telemetry methods of ``StreamingDataset``, over its job directory, readers and world."""

    _job: JobDir
    readers: list[LocalDataset]
    telemetry: bool

    if TYPE_CHECKING:

        @property
        def world(self) -> World:
            """This process's world (``StreamingDataset.world``)."""

    def metrics(self, num_workers: int | None = None) -> dict[str, Any]:
        """This rank's worker counters: ``{"rank", "workers": [...], "totals": {...}}`` (plain, JSON-ready).

        Each worker's counters are cumulative since its current (or last) iteration began; fields
        are described in docs/operations.md, "Loader telemetry". ``num_workers`` (the DataLoader's,
        0 counting as 1) lists exactly those workers, zeros for one not started yet; without it, the
        workers that have started. With ``telemetry=False`` the list is empty and the totals zero.
        """
        rank = self.world.rank
        workers = read_workers(self._job, rank, num_workers) if self.telemetry else []
        return {"rank": rank, "workers": workers, "totals": totals(workers)}

    def reset_metrics(self) -> None:
        """Forget this rank's worker counters (``StreamingDataLoader`` does so as each iteration begins)."""
        if self.telemetry:
            clear(self._job, self.world.rank)

    def _start_metrics(self, world: World) -> WorkerMetrics | None:
        """Fresh counters for this worker's iteration; its shard caches count into them too."""
        if not self.telemetry:
            return None
        metrics = WorkerMetrics(self._job, world.rank, world.worker_of_rank)
        for reader in self.readers:
            if reader.shard_cache is not None:
                reader.shard_cache.stats = metrics.cache
        return metrics
