"""``check_loader``: stream a dataset the way training will, before anyone is pointed at it.

A real ``StreamingDataLoader`` (with DataLoader workers) reads one whole epoch; every sample must
arrive exactly once. Halfway through, the loader's ``state_dict`` is taken as training checkpoints,
without stopping; a fresh loader resumed from it must yield exactly the rest of that epoch. Throughput is
measured on the way. ``mds check-loader`` and the pipelines' blocking asset check both run this.

``check_version`` is the bounded form for a shard set checked every day: the version's new shards
in full plus a bounded, seeded sample of the older ones (``mds_core.streaming.version_sample``), so
its cost stays flat however long the history grows.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mds_core.storage.remote import RemoteStore, open_store
from mds_core.streaming.cache_limit import parse_cache_limit
from mds_core.streaming.dataset import StreamingDataset
from mds_core.streaming.loader import StreamingDataLoader
from mds_core.streaming.stream import Stream
from mds_core.streaming.version_sample import (
    DEFAULT_CHECK_BATCH_SIZE,
    DEFAULT_CHECK_WORKERS,
    DEFAULT_SAMPLE_ROWS,
    DEFAULT_SAMPLE_SECONDS,
    VersionSubset,
    fetch_sample,
    select_subset,
    write_subset_index,
)
from mds_core.versions.shard_set import ShardSet

SAMPLE_ID = "__mds_sample_id__"  # added to each sample so the check sees which ones arrived


@dataclass
class LoaderCheckReport:
    """What ``check_loader`` found; ``problems`` is empty when it passed."""

    location: str
    version: int | None
    samples_expected: int
    batch_size: int
    num_workers: int
    samples_streamed: int = 0
    distinct: int = 0
    exactly_once: bool = False
    resumed_at_sample: int = 0
    continuation_matches: bool = False
    samples_per_second: float = 0.0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    telemetry: dict[str, Any] = field(default_factory=dict)  # the full epoch's ``loader.metrics()``
    subset: dict[str, Any] = field(default_factory=dict)  # check_version: which shards and rows (VersionSubset)

    @property
    def passed(self) -> bool:
        """Whether the check found no problem."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The report as a dict, ``passed`` included."""
        return {**asdict(self), "passed": self.passed}


class _IdTaggedDataset(StreamingDataset):
    """A StreamingDataset whose samples carry their global sample id."""

    def _samples(self, ids: np.ndarray, refetch_deleted: bool = False, first: bool = False) -> Iterator[dict[str, Any]]:
        for sample_id, sample in zip(ids.tolist(), super()._samples(ids, refetch_deleted, first)):
            sample[SAMPLE_ID] = sample_id  # each sample is a fresh dict: tagging it in place copies nothing
            yield sample


def check_loader(
    remote: str | None = None,
    local: str | None = None,
    *,
    version: int | None = None,
    batch_size: int = DEFAULT_CHECK_BATCH_SIZE,
    num_workers: int = DEFAULT_CHECK_WORKERS,
    samples_expected: int | None = None,
    min_samples_per_second: float = 0.0,
    **dataset_kwargs: Any,
) -> LoaderCheckReport:
    """Stream the dataset at ``remote`` (through a cache at ``local``) or at ``local`` and check it.

    With a ``remote`` and no ``local``, a temporary cache is used and removed afterwards.
    ``samples_expected`` (default: the dataset's sample count) is how many samples the epoch must
    deliver, each once; ``dataset_kwargs`` go to ``StreamingDataset`` (``shuffle`` defaults to True).
    """
    scratch = tempfile.mkdtemp(prefix="mds-check-loader-") if remote is not None and local is None else None
    try:
        make = _loader_factory(
            lambda: {"remote": remote, "local": local or scratch, "version": version},
            batch_size,
            num_workers,
            {"shuffle": True, **dataset_kwargs},
        )
        return _run(
            make, remote or local or "", version, batch_size, num_workers, samples_expected, min_samples_per_second
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def check_version(
    root: str,
    version: int,
    *,
    local: str | None = None,
    storage_options: dict[str, Any] | None = None,
    sample_rows: int | None = DEFAULT_SAMPLE_ROWS,
    sample_seconds: float | None = DEFAULT_SAMPLE_SECONDS,
    seed: int = 0,
    cache_limit: int | str | None = None,
    batch_size: int = DEFAULT_CHECK_BATCH_SIZE,
    num_workers: int = DEFAULT_CHECK_WORKERS,
    min_samples_per_second: float = 0.0,
    **dataset_kwargs: Any,
) -> LoaderCheckReport:
    """``check_loader`` on a bounded subset of version ``version`` of the shard set at ``root``.

    The subset is the version's new shards (under ``data/<its transaction>/``) in full, plus older
    shards drawn from ``(seed, version)`` while they fit in ``sample_rows`` rows and arrive within
    ``sample_seconds`` (None: no such bound; 0 rows: the new shards only). It is streamed through
    the cache ``local`` (default: a temporary directory, removed afterwards), which then holds
    only the subset; ``cache_limit`` also bounds the sample's bytes and is passed to the dataset.
    ``report.subset`` says which shards and rows were read. ``storage_options`` go to every read
    of the store, the loader's downloads included.
    """
    scratch = tempfile.mkdtemp(prefix="mds-check-version-") if local is None else None
    cache = local or scratch or ""
    try:
        subset = select_subset(
            ShardSet(root, storage_options=storage_options),
            version,
            seed=seed,
            sample_rows=sample_rows,
            sample_seconds=sample_seconds,
            cache_limit=parse_cache_limit(cache_limit),
        )
        report = LoaderCheckReport(root, version, subset.rows, batch_size, num_workers)
        try:
            store = open_store(
                root, retry=3, timeout=dataset_kwargs.get("download_timeout", 60.0), storage_options=storage_options
            )
            fetch_sample(subset, store, cache, validate_hash=dataset_kwargs.get("validate_hash"))
        except Exception as err:  # a damaged old shard fails the check like a damaged new one
            report.problems.append(f"fetching the sample failed: {_reason(err)}")
            report.subset = subset.to_json()
            return report
        source = {"remote": root, "local": cache, "storage_options": storage_options}
        return _check_subset(
            subset,
            source,
            batch_size,
            num_workers,
            min_samples_per_second,
            {"shuffle": True, "cache_limit": cache_limit, **dataset_kwargs},
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


class _PlacedIndexStream(Stream):
    """A stream whose ``index.json`` (the subset's) was put in its cache beforehand, not fetched from the root.

    Its downloads use the check's ``storage_options`` (a plain Stream uses the environment's).
    """

    def __init__(self, *, storage_options: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.storage_options = storage_options

    def fetch_index(self) -> None:
        pass

    def store(self) -> RemoteStore:
        return open_store(
            self.remote or "",
            retry=max(1, self.download_retry or 1),
            timeout=self.download_timeout,
            storage_options=self.storage_options,
        )


def _check_subset(
    subset: VersionSubset,
    source: dict[str, Any],
    batch_size: int,
    num_workers: int,
    min_samples_per_second: float,
    dataset_kwargs: dict[str, Any],
) -> LoaderCheckReport:
    write_subset_index(subset.shards, source["local"])
    make = _loader_factory(lambda: {"streams": [_PlacedIndexStream(**source)]}, batch_size, num_workers, dataset_kwargs)
    report = _run(make, source["remote"], subset.version, batch_size, num_workers, subset.rows, min_samples_per_second)
    report.subset = subset.to_json()
    return report


def _loader_factory(
    source: Callable[[], dict[str, Any]], batch_size: int, num_workers: int, dataset_kwargs: dict[str, Any]
) -> Callable[[], StreamingDataLoader]:
    """Fresh loaders over the same data.

    ``source`` gives the dataset's remote/local/version or streams anew each time, since a dataset adopts its Stream
    objects (it writes their weights back).
    """

    def make() -> StreamingDataLoader:
        dataset = _IdTaggedDataset(**source(), batch_size=batch_size, **dataset_kwargs)
        # Each loader reads one epoch: workers kept for a next one would only hold memory meanwhile.
        return StreamingDataLoader(dataset, batch_size=batch_size, num_workers=num_workers, persistent_workers=False)

    return make


def _run(
    make: Callable[[], StreamingDataLoader],
    location: str,
    version: int | None,
    batch_size: int,
    num_workers: int,
    samples_expected: int | None,
    min_samples_per_second: float,
) -> LoaderCheckReport:
    loader = make()
    dataset = loader.dataset
    if not isinstance(dataset, StreamingDataset):  # what _loader_factory builds every loader over
        raise TypeError(f"check_loader needs a StreamingDataset, got {type(dataset).__name__}")
    expected = samples_expected if samples_expected is not None else dataset.num_samples
    report = LoaderCheckReport(location, version, expected, batch_size, num_workers)
    started = time.perf_counter()
    try:
        order, checkpoint = _epoch_with_checkpoint(loader)
    except Exception as err:  # a damaged or missing shard: a failed check that names it, not a crash
        report.problems.append(f"reading failed: {_reason(err)}")
        return report
    report.seconds = time.perf_counter() - started
    report.telemetry = loader.metrics()
    counts = _id_counts(order, dataset.num_samples)
    report.samples_streamed, report.distinct = len(order), int(np.count_nonzero(counts))
    report.samples_per_second = len(order) / report.seconds if report.seconds else 0.0
    # Every id in range (an id outside it is not counted, so the total falls short) and none twice.
    report.exactly_once = len(order) == expected and int(counts.sum()) == len(order) and bool((counts == 1).all())
    if not report.exactly_once:
        report.problems.append(
            f"streamed {report.samples_streamed} samples ({report.distinct} distinct), "
            f"expected each of {expected} exactly once"
        )
    _check_resume(make, order, checkpoint, report)
    if report.samples_per_second < min_samples_per_second:
        report.problems.append(
            f"throughput {report.samples_per_second:.0f} samples/s is below the required "
            f"{min_samples_per_second:.0f} samples/s"
        )
    return report


def _epoch_with_checkpoint(loader: StreamingDataLoader) -> tuple[np.ndarray, tuple[int, Any]]:
    """One whole epoch's sample ids, and the loader's state taken halfway (in whole batches) as training checkpoints.

    Mid-iteration, the loop going on. (samples before it, state) is the checkpoint.
    """
    halfway = max(1, len(loader) // 2)  # over a StreamingDataset, a loader has a length
    batches: list[np.ndarray] = []
    taken = 0
    checkpoint: tuple[int, Any] = (0, None)
    for step, batch in enumerate(loader, start=1):
        batches.append(_ids(batch))
        taken += len(batches[-1])
        if step == halfway:
            checkpoint = (taken, loader.state_dict())
    return _joined(batches), checkpoint


def _check_resume(
    make: Callable[[], StreamingDataLoader], order: np.ndarray, checkpoint: tuple[int, Any], report: LoaderCheckReport
) -> None:
    """A fresh loader resumed from the mid-epoch checkpoint must yield exactly the uninterrupted epoch's rest."""
    taken, state = checkpoint
    resumed = make()
    if state is not None:  # always: the loader's dataset is a StreamingDataset
        resumed.load_state_dict(state)
    rest = _joined([_ids(batch) for batch in resumed])
    report.resumed_at_sample = int(state["sample_in_epoch"]) if state else 0
    report.continuation_matches = np.array_equal(order[taken:], rest)
    if not report.continuation_matches:
        report.problems.append(
            f"resuming at sample {report.resumed_at_sample} gave {len(rest)} samples that "
            "differ from the uninterrupted epoch's remainder"
        )


def _ids(batch: dict[str, Any]) -> np.ndarray:
    # One call for the whole column (a tensor or a list): no Python object per id.
    return np.asarray(batch[SAMPLE_ID], np.int64)


def _joined(batches: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(batches) if batches else np.empty(0, np.int64)


def _id_counts(order: np.ndarray, num_samples: int) -> np.ndarray:
    """How often each id in ``range(num_samples)`` was streamed (ids outside it are not counted)."""
    inside = order[(order >= 0) & (order < num_samples)]
    return np.bincount(inside, minlength=num_samples)


def _reason(err: BaseException) -> str:
    """The error's own message: a DataLoader worker's error arrives wrapped in its whole traceback."""
    text = str(err).strip()
    if "Original Traceback" in text:
        text = text.splitlines()[-1].strip()
    return text or type(err).__name__
