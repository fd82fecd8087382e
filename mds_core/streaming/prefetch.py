"""Shard downloads ahead of the consumer: each shard is requested in the order the worker first needs it."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class Prefetch:
    """Feeds each remote stream's ``ShardCache.prefetch`` as the consumer's position advances.

    Args:
        owners: for every global shard id, ``(LocalDataset, shard id within it)``.
        shards_of: ``shards_of(start, end)`` is the global shard id of each of this worker's samples
            ``start .. end - 1``, in order (asked for in consecutive spans, as the consumer advances).
        ready: how many of this worker's samples are known now (all of them, or the first batches
            while the rest of the epoch's order is being made).
        together: how many samples the consumer takes at once at first (1; a DataLoader worker's batch): their
            shards download first, before those needed later (``ShardCache.prefetch``'s ``heads``).
    """

    def __init__(
        self,
        owners: Sequence[tuple[Any, int]],
        shards_of: Callable[[int, int], np.ndarray],
        ready: Callable[[], int],
        together: int = 1,
    ) -> None:
        self._owners, self._shards_of, self._ready, self._together = owners, shards_of, ready, together
        self._position = 0  # samples looked at so far
        self._requested: set[int] = set()
        self._caches: dict[int, Any] = {}

    def up_to(self, position: int) -> None:
        """Request every shard first needed before sample ``position`` of this worker's sequence."""
        end = min(position, self._ready())
        if end <= self._position:
            return
        span = self._shards_of(self._position, end)
        heads = set(span[: self._together].tolist()) if not self._position else set()  # the first step's shards
        self._position = end
        unique, first_use = np.unique(span, return_index=True)
        wanted: dict[int, tuple[Any, list[int]]] = {}
        first: dict[int, int] = {}  # per cache, how many of its shards the first step needs (they come first)
        for shard in unique[np.argsort(first_use, kind="stable")].tolist():
            if shard in self._requested:
                continue
            self._requested.add(shard)
            dataset, shard_of_dataset = self._owners[shard]
            if dataset.shard_cache is not None:
                wanted.setdefault(id(dataset), (dataset.shard_cache, []))[1].append(shard_of_dataset)
                first[id(dataset)] = first.get(id(dataset), 0) + (shard in heads)
        for key, (cache, shards) in wanted.items():
            self._caches[key] = cache
            cache.prefetch(shards, heads=first[key])

    def stop(self, wait: bool = True) -> None:
        """Drop queued downloads when iteration ends or is abandoned; running ones finish (waited for if ``wait``)."""
        for cache in self._caches.values():
            cache.close(wait=wait)


def samples_ahead(predownload: int | None, batch_size: int | None) -> int:
    """Samples to fetch ahead: ``8 * batch_size`` (or 64) by default; the reference's warning when too few."""
    if predownload is None:
        return 8 * batch_size if batch_size else 64
    if batch_size is not None and predownload < batch_size:
        warnings.warn(
            f"predownload < batch_size ({predownload} < {batch_size}).This may result in slower batch "
            "time. Recommendation is to set predownload to at-least batch_size.",
            stacklevel=3,
        )
    return predownload
