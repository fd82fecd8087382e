"""``StreamingDataLoader``: a DataLoader that counts what it yielded, so its state dict can resume mid-epoch."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from mds_core.errors import ConfigurationError
from mds_core.storage.handover import open_clients_for_workers
from mds_core.streaming.collate import collate_for_transit, collate_samples, finish_batch
from mds_core.streaming.dataset import StreamingDataset, register_with_torch
from mds_core.streaming.telemetry import BatchWaits, totals
from mds_core.streaming.world import current_rank, heap_frozen_for_fork

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, ...)
_NUM_WORKERS_POSITION = 5
_COLLATE_FN_POSITION = 6

# mds_core.streaming.dataset may have been imported before torch.
register_with_torch()


class StreamingDataLoader(DataLoader[Any]):
    """``torch.utils.data.DataLoader`` with ``state_dict`` / ``load_state_dict``, as in the reference.

    Without a ``collate_fn`` it batches with ``collate_samples``: ``default_collate``'s result, made
    column by column through numpy (about three times faster on MDS samples). Unless memory is
    pinned, small columns leave the workers as numpy arrays and become tensors here (see
    ``mds_core.streaming.collate``).

    ``metrics()`` tells where the data time goes (see docs/operations.md, "Loader telemetry"). With
    ``metrics_callback``, ``metrics_callback(loader.metrics())`` is called every ``metrics_every``
    batches, before that batch is handed out, and once more when an iteration runs to its end (not
    when the loop leaves early); training code sends the dict to its logger. Neither argument goes
    to torch's DataLoader.

    With DataLoader workers, ``persistent_workers`` defaults to True (torch's default is False): the
    next epoch then starts in the workers that read this one, with their shards open and their
    clients made, instead of forking and setting up new ones (0.09 s before its first batch, most of
    it fork and set-up). A loaded state and the epoch reach living workers through the job directory.
    Pass ``persistent_workers=False`` to have torch shut the workers down after each epoch.

    Args:
        *args: torch's ``DataLoader`` arguments, the dataset first.
        metrics_callback: called with ``metrics()`` every ``metrics_every`` batches and at the end of
            an epoch; ``None`` (the default) calls nothing.
        metrics_every: batches between two calls of ``metrics_callback`` (an int, at least 1; 100).
        **kwargs: torch's ``DataLoader`` keyword arguments; ``collate_fn`` defaults to
            ``collate_samples`` and ``persistent_workers`` to True when there are workers.
    """

    def __init__(
        self,
        *args: Any,
        metrics_callback: Callable[[dict[str, Any]], Any] | None = None,
        metrics_every: int = 100,
        **kwargs: Any,
    ) -> None:
        if isinstance(metrics_every, bool) or not isinstance(metrics_every, int) or metrics_every < 1:
            raise ConfigurationError(f"metrics_every must be an int >= 1 (batches), got {metrics_every!r}")
        if metrics_callback is not None and not callable(metrics_callback):
            raise ConfigurationError(f"metrics_callback must be callable, got {metrics_callback!r}")
        if kwargs.get("collate_fn") is None and len(args) <= _COLLATE_FN_POSITION:
            # The pin-memory thread pins tensors only, so pinned batches must leave workers as tensors.
            kwargs["collate_fn"] = collate_samples if kwargs.get("pin_memory") else collate_for_transit
        if "persistent_workers" not in kwargs:
            workers = args[_NUM_WORKERS_POSITION] if len(args) > _NUM_WORKERS_POSITION else kwargs.get("num_workers", 0)
            kwargs["persistent_workers"] = isinstance(workers, int) and workers > 0
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0
        self.metrics_callback, self.metrics_every = metrics_callback, metrics_every
        self._waits = BatchWaits()

    # torch types DataLoader.__iter__ as its private _BaseDataLoaderIter; this one (as the reference's)
    # is a generator of batches, which is all that iterating a loader uses.
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self.num_samples_yielded = 0
        self._waits = BatchWaits()
        # Workers fork now unless persistent ones are alive from an earlier epoch (torch's _iterator).
        forks = self.num_workers > 0 and (self._iterator is None or not self.persistent_workers)
        if isinstance(self.dataset, StreamingDataset):
            self.dataset.reset_metrics()  # before the workers start, so only this iteration is read
            if forks:
                open_clients_for_workers(self.dataset.readers)  # workers about to fork take its session over
        with heap_frozen_for_fork() if forks else contextlib.nullcontext():
            batches = super().__iter__()
        callback, every = self.metrics_callback, self.metrics_every
        while True:
            # The training loop waits for the next batch and for making its columns tensors.
            started = time.perf_counter()
            try:
                batch = finish_batch(next(batches))
            except StopIteration:
                break
            self._waits.add(time.perf_counter() - started)
            self.num_samples_yielded += _batch_size(batch)
            if callback is not None and self._waits.batches % every == 0:
                callback(self.metrics())
            yield batch
        if callback is not None:
            callback(self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Telemetry of this rank since the current (or last) iteration began, as a plain JSON-ready dict.

        ``batches``, ``samples``, ``wait_seconds`` and ``wait_max_seconds`` are measured here, in the
        training loop's process; ``workers`` lists every DataLoader worker's counters (the main
        process is worker 0 with ``num_workers=0``) and ``totals`` sums them (maxima for the
        ``*_max_seconds`` fields). Empty ``workers`` and zero ``totals`` if the dataset is not a
        ``StreamingDataset`` or was built with ``telemetry=False``.
        """
        if isinstance(self.dataset, StreamingDataset):
            part = self.dataset.metrics(num_workers=max(1, self.num_workers))
        else:
            part = {"rank": current_rank(), "workers": [], "totals": totals([])}
        waits = self._waits
        return {
            "rank": part["rank"],
            "batches": waits.batches,
            "samples": self.num_samples_yielded,
            "wait_seconds": waits.seconds,
            "wait_max_seconds": waits.max_seconds,
            "workers": part["workers"],
            "totals": part["totals"],
        }

    def state_dict(self) -> dict[str, Any] | None:
        """The dataset's state after the batches handed out so far (unconsumed prefetches not counted)."""
        if not isinstance(self.dataset, StreamingDataset):
            return None
        replication = self.dataset.replication or 1
        num_samples = self._samples_consumed() * self.dataset.world.num_ranks // replication
        return self.dataset.state_dict(num_samples, from_beginning=False)

    def _samples_consumed(self) -> int:
        """This rank's samples that training has taken: those handed out (a trainer may count fewer)."""
        return self.num_samples_yielded

    def load_state_dict(self, obj: dict[str, Any], allow_other_data: bool = False) -> None:
        """Resume the dataset from ``obj`` at the next iteration.

        Args:
            obj: a ``state_dict()`` saved earlier.
            allow_other_data: resume even if the data or its settings changed (see
                ``StreamingDataset.load_state_dict``).
        """
        if isinstance(self.dataset, StreamingDataset):
            self.dataset.load_state_dict(obj, allow_other_data=allow_other_data)


def _batch_size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return len(batch)
    if isinstance(batch, dict) or hasattr(batch, "keys"):
        return len(next(iter(batch.values())))
    return len(batch[0])
