"""Which shards a bounded check of one version reads: its new shards in full, plus a seeded sample of the rest.

A daily append makes every version one day bigger; reading all of it every day would make the
check's cost grow with the history. The new shards (those under ``data/<transaction>/``) are what
this commit changed, so they are read in full; the older shards were checked when they were new, so
a bounded sample of them guards against damage since then. The sample is drawn from
``(seed, version)``: reproducible for a version, and a different one each day, so that over days
every shard comes up.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_merged_index, parse_index
from mds_core.storage.files import atomic_write
from mds_core.storage.remote import RemoteStore
from mds_core.storage.shard_cache import ShardCache
from mds_core.versions.manifest import DATA
from mds_core.versions.shard_set import ShardSet

DEFAULT_SAMPLE_ROWS = 20_000  # a few seconds of streaming for typical rows; see docs/operations.md
DEFAULT_SAMPLE_SECONDS = 30.0  # the most the sample's downloads may take, whatever the store's speed
# The loader the checks (check_loader, check_version) stream with, here where the CLI and the pipelines'
# settings import them without torch. Batches as large as training's: at 16, handing batches between
# processes took most of the check's time.
DEFAULT_CHECK_BATCH_SIZE = 256
DEFAULT_CHECK_WORKERS = 2


@dataclass
class VersionSubset:
    """The shards of ``version`` a bounded check reads, in the version's order, and why it stopped there."""

    version: int
    transaction: str
    total_shards: int
    total_rows: int
    new: list[ShardInfo]
    sampled: list[ShardInfo]
    seed: int
    sample_rows: int | None
    sample_seconds: float | None
    limited_by: str = "nothing"  # what kept the sample from taking every older shard
    fetch_seconds: float = 0.0  # spent downloading the sample before the loader runs
    order: list[str] = field(default_factory=list)  # basenames of the version, to keep its order

    @property
    def shards(self) -> list[ShardInfo]:
        """New and sampled shards in the order the version lists them (its index's order)."""
        chosen = {s.raw_data.basename: s for s in (*self.new, *self.sampled)}
        return [chosen[name] for name in self.order if name in chosen]

    @property
    def rows(self) -> int:
        """Rows in the shards checked, new and sampled."""
        return sum(s.samples for s in (*self.new, *self.sampled))

    def to_json(self) -> dict[str, Any]:
        """What the pipeline records: which shards and rows were checked, new and sampled."""
        return {
            "version": self.version,
            "transaction": self.transaction,
            "total_shards": self.total_shards,
            "total_rows": self.total_rows,
            "new_shards": [_stored_name(s) for s in self.new],
            "new_rows": sum(s.samples for s in self.new),
            "sampled_shards": [_stored_name(s) for s in self.sampled],
            "sampled_rows": sum(s.samples for s in self.sampled),
            "seed": self.seed,
            "sample_rows": self.sample_rows,
            "sample_seconds": self.sample_seconds,
            "sample_limited_by": self.limited_by,
            "sample_fetch_seconds": round(self.fetch_seconds, 4),
        }


def _stored_name(shard: ShardInfo) -> str:
    """The shard's file on the store (the compressed one, where it is compressed), relative to the root."""
    return (shard.zip_data or shard.raw_data).basename


def select_subset(
    shard_set: ShardSet,
    version: int,
    *,
    seed: int = 0,
    sample_rows: int | None = DEFAULT_SAMPLE_ROWS,
    sample_seconds: float | None = DEFAULT_SAMPLE_SECONDS,
    cache_limit: int | None = None,
) -> VersionSubset:
    """The version's new shards and a sample of its other shards of at most ``sample_rows`` rows.

    Two reads (the manifest and the version's index), however long the history. Older shards are
    visited in an order drawn from ``(seed, version)`` and taken whole while they fit in the row
    budget (and, with a ``cache_limit``, while the subset's raw bytes fit in it); a shard that does
    not fit is skipped, so a shard larger than ``sample_rows`` is never sampled.
    """
    _check_budgets(seed, sample_rows, sample_seconds)
    info = shard_set.version(version)
    where = f"{shard_set.store.url} version {version}"
    shards = parse_index(shard_set.store.read_bytes(info.index), where)
    prefix = f"{DATA}/{info.transaction}/"
    new = [s for s in shards if s.raw_data.basename.startswith(prefix)]
    others = [s for s in shards if not s.raw_data.basename.startswith(prefix)]
    byte_budget = None if cache_limit is None else cache_limit - sum(s.raw_data.bytes for s in new)
    sampled, limited_by = _draw(others, np.random.default_rng([seed, version]), sample_rows, byte_budget)
    return VersionSubset(
        version,
        info.transaction,
        len(shards),
        sum(s.samples for s in shards),
        new,
        sampled,
        seed,
        sample_rows,
        sample_seconds,
        limited_by,
        order=[s.raw_data.basename for s in shards],
    )


def _check_budgets(seed: int, sample_rows: int | None, sample_seconds: float | None) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigurationError(f"seed must be an int >= 0, got {seed!r}")
    if sample_rows is not None and (
        isinstance(sample_rows, bool) or not isinstance(sample_rows, int) or sample_rows < 0
    ):
        raise ConfigurationError(f"sample_rows must be an int >= 0 or None (no bound), got {sample_rows!r}")
    if sample_seconds is not None and not sample_seconds >= 0:
        raise ConfigurationError(f"sample_seconds must be >= 0 or None (no bound), got {sample_seconds!r}")


def _draw(
    others: list[ShardInfo], rng: np.random.Generator, row_budget: int | None, byte_budget: int | None
) -> tuple[list[ShardInfo], str]:
    """Shards taken in the generator's order while they fit both budgets (None: unbounded)."""
    taken: list[ShardInfo] = []
    rows = size = 0
    limited_by = "nothing"
    for position in rng.permutation(len(others)).tolist():
        shard = others[position]
        if row_budget is not None and rows + shard.samples > row_budget:
            limited_by = "rows" if limited_by == "nothing" else limited_by
            continue
        if byte_budget is not None and size + shard.raw_data.bytes > byte_budget:
            limited_by = "cache_limit" if limited_by == "nothing" else limited_by
            continue
        taken.append(shard)
        rows, size = rows + shard.samples, size + shard.raw_data.bytes
    return taken, limited_by


def fetch_shards(
    store: RemoteStore,
    local: str,
    shards: list[ShardInfo],
    *,
    validate_hash: str | None = None,
    deadline: float | None = None,
    clock: Any = time.monotonic,
) -> int:
    """Download ``shards`` into ``local`` (raw files at their basenames); return how many arrived in time.

    All are queued at once and taken in order until ``deadline`` (a ``clock()`` time; None: all).
    """
    cache = ShardCache(store, local, shards, validate_hash=validate_hash)
    cache.prefetch(range(len(shards)))
    try:
        for shard_id in range(len(shards)):
            if deadline is not None and clock() >= deadline:
                return shard_id
            cache.ensure(shard_id)
    finally:
        cache.close()  # queued downloads are dropped; a running one finishes
    return len(shards)


def fetch_sample(
    subset: VersionSubset,
    store: RemoteStore,
    local: str,
    *,
    validate_hash: str | None = None,
    clock: Any = time.monotonic,
) -> None:
    """Download the sampled shards into ``local`` in draw order until ``subset.sample_seconds`` is spent.

    The seconds budget is enforced here, before the loader runs, because the subset must be fixed
    before its exactly-once epoch. Shards not fetched in time leave the sample (``limited_by`` becomes
    ``"seconds"``); any that arrived anyway are deleted, so the cache holds only the checked subset.
    The loader then finds the sample present and downloads only the new shards itself.
    """
    if not subset.sampled:
        return
    started = clock()
    deadline = None if subset.sample_seconds is None else started + subset.sample_seconds
    try:
        kept = fetch_shards(store, local, subset.sampled, validate_hash=validate_hash, deadline=deadline, clock=clock)
    finally:
        subset.fetch_seconds = clock() - started
    if kept < len(subset.sampled):
        for shard in subset.sampled[kept:]:
            _remove_files(local, shard)
        subset.sampled = subset.sampled[:kept]
        subset.limited_by = "seconds"


def _remove_files(local: str, shard: ShardInfo) -> None:
    for info in (shard.raw_data, shard.zip_data):
        if info is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(local, info.basename))


def write_subset_index(shards: list[ShardInfo], local: str) -> None:
    """``shards`` as ``<local>/index.json``: basenames relative to the root, so the shards come from it."""
    os.makedirs(local, exist_ok=True)
    # A scratch cache's index: not worth an fsync, it is rewritten by the next check.
    atomic_write(os.path.join(local, INDEX_BASENAME), [dumps_merged_index(shards).encode("utf-8")], durable=False)


def describe_subset(checked: dict[str, Any]) -> str:
    """One line for people: what a bounded check read."""
    return (
        f"checked {len(checked['new_shards'])} new shard(s) ({checked['new_rows']:,} rows) and "
        f"{len(checked['sampled_shards'])} sampled shard(s) ({checked['sampled_rows']:,} rows) of "
        f"{checked['total_shards']:,} ({checked['total_rows']:,} rows); sample limited by "
        f"{checked['sample_limited_by']}, seed {checked['seed']}"
    )
