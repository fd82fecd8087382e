"""Loader telemetry: where a training loop's data time goes, per rank and per DataLoader worker.

Each worker (the main process when ``num_workers=0``) keeps its counters in a small float64 file in
the job directory, ``metrics-r<rank>-w<worker>.f64``, memory-mapped read-write: samples and decode
seconds (updated once per decode block of 256 samples) and its shard caches' ``CacheStats``
(updated once per shard event). The main process reads those files whenever it is asked, so
publishing costs the workers no messages, locks or system calls. Field meanings: docs/operations.md,
"Loader telemetry".

The counters are cumulative since the worker's current iteration began: a worker replaces its file
with zeros when it starts iterating, and ``StreamingDataLoader`` removes the rank's files as each of
its iterations begins, so nothing from the previous epoch is read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from mds_core.storage.cache_stats import COUNTS, CacheStats, counters_dict
from mds_core.storage.cache_stats import FIELDS as CACHE_FIELDS
from mds_core.storage.files import staged_path
from mds_core.streaming.jobdir import JobDir

WORKER_FIELDS = ("samples", "decode_seconds", *CACHE_FIELDS)
_COUNTS = COUNTS | {"samples"}
_SAMPLES, _DECODE, _CACHE = 0, 1, 2
_SHARD_WAIT = _CACHE + CACHE_FIELDS.index("shard_wait_seconds")


def metrics_file(rank: int, worker: int) -> str:
    """The name of one worker's counters file inside the job directory."""
    return f"metrics-r{rank}-w{worker}.f64"


class WorkerMetrics:
    """This process's counters for its current iteration, in its (new, zeroed) file in the job directory."""

    def __init__(self, job: JobDir, rank: int, worker: int) -> None:
        path = job.file(metrics_file(rank, worker))
        # Renamed into place, so a reader sees the previous iteration's file or the fresh one, whole.
        with staged_path(path, durable=False) as tmp:
            np.zeros(len(WORKER_FIELDS), np.float64).tofile(tmp)
        # A plain ndarray over the map: indexing an np.memmap costs twice as much, per block.
        self.values = np.asarray(np.memmap(path, np.float64, "r+", shape=(len(WORKER_FIELDS),)))
        self.cache = CacheStats(self.values[_CACHE:])
        self._samples, self._decode_seconds = 0, 0.0  # this thread's counters, copied out per block

    def mark(self) -> tuple[float, float]:
        """Where a decode block starts: the clock and the time spent waiting for shards so far."""
        return time.perf_counter(), self.values.item(_SHARD_WAIT)

    def decoded(self, samples: int, mark: tuple[float, float]) -> None:
        """A block of ``samples`` was decoded since ``mark``; time spent waiting for shards is not decoding."""
        started, waited = mark
        seconds = time.perf_counter() - started - (self.values.item(_SHARD_WAIT) - waited)
        self._samples += samples
        self._decode_seconds += max(0.0, seconds)
        self.values[_SAMPLES], self.values[_DECODE] = self._samples, self._decode_seconds


def read_workers(job: JobDir, rank: int, num_workers: int | None = None) -> list[dict[str, int | float]]:
    """Every worker's counters for ``rank``, by worker id.

    With ``num_workers``, exactly workers ``0 .. num_workers - 1`` (zeros for one that has not
    started yet); without, the workers whose files exist.
    """
    prefix = f"metrics-r{rank}-w"
    if num_workers is None:
        try:
            names = os.listdir(job.path)
        except FileNotFoundError:
            names = []
        ids = sorted(
            int(n[len(prefix) : -4])
            for n in names
            if n.startswith(prefix) and n.endswith(".f64") and n[len(prefix) : -4].isdigit()
        )
    else:
        ids = list(range(num_workers))
    zeros = np.zeros(len(WORKER_FIELDS), np.float64)
    out = []
    for worker in ids:
        try:
            values = np.fromfile(job.file(metrics_file(rank, worker)), np.float64)
        except FileNotFoundError:
            values = zeros
        if values.shape != zeros.shape:  # not one of ours: read as not started
            values = zeros
        out.append({"worker": worker, **_named(values)})
    return out


def totals(workers: list[dict[str, int | float]]) -> dict[str, int | float]:
    """Sums over ``workers`` of every field, except the ``*_max_seconds`` fields: their maximum."""
    out = _named(np.zeros(len(WORKER_FIELDS), np.float64))
    for worker in workers:
        for name in WORKER_FIELDS:
            out[name] = max(out[name], worker[name]) if name.endswith("_max_seconds") else out[name] + worker[name]
    return out


def clear(job: JobDir, rank: int) -> None:
    """Remove ``rank``'s worker files, so the next reading covers only the iteration about to start."""
    job.remove_files(f"metrics-r{rank}-w", keep=set())


def _named(values: np.ndarray) -> dict[str, int | float]:
    return counters_dict(values, WORKER_FIELDS, _COUNTS)


@dataclass
class BatchWaits:
    """How long the training loop waited for the loader's batches (count, total and slowest)."""

    batches: int = 0
    seconds: float = 0.0
    max_seconds: float = 0.0

    def add(self, seconds: float) -> None:
        """Count one batch that waited ``seconds``."""
        self.batches += 1
        self.seconds += seconds
        self.max_seconds = max(self.max_seconds, seconds)
