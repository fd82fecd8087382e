"""Shard downloads ahead of the consumer: each shard is requested in the order the worker first needs it."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


class Prefetch:
    """Feeds each remote stream's ``ShardCache.prefetch`` as the consumer's position advances.

    Args:
        owners: for every global shard id, ``(LocalDataset, shard id within it)``.
        shard_ids: the global shard id of every sample this worker will read, in order.
    """

    def __init__(self, owners: list[tuple[Any, int]], shard_ids: np.ndarray) -> None:
        unique, first_use = np.unique(shard_ids, return_index=True)
        by_first_use = np.argsort(first_use, kind="stable")
        self._shards = unique[by_first_use].tolist()
        self._first_use = first_use[by_first_use].tolist()
        self._owners = owners
        self._next = 0
        self._caches: dict[int, Any] = {}

    def up_to(self, position: int) -> None:
        """Request every shard first needed before sample ``position`` of this worker's sequence."""
        start = self._next
        while self._next < len(self._shards) and self._first_use[self._next] < position:
            self._next += 1
        wanted: dict[int, tuple[Any, list[int]]] = {}
        for shard in self._shards[start : self._next]:
            dataset, shard_of_dataset = self._owners[shard]
            if dataset.shard_cache is not None:
                wanted.setdefault(id(dataset), (dataset.shard_cache, []))[1].append(shard_of_dataset)
        for key, (cache, shards) in wanted.items():
            self._caches[key] = cache
            cache.prefetch(shards)

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
