"""``check_loader``: stream a dataset the way training will, before anyone is pointed at it.

A real ``StreamingDataLoader`` (with DataLoader workers) reads one whole epoch; every sample must
arrive exactly once. Then a fresh loader stops halfway, its ``state_dict`` goes into another fresh
loader, and the rest of the epoch must be exactly the uninterrupted epoch's rest. Throughput is
measured on the way. ``mds check-loader`` and the pipelines' blocking asset check both run this.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from mds_core.streaming.dataset import StreamingDataset
from mds_core.streaming.loader import StreamingDataLoader

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

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


class _IdTaggedDataset(StreamingDataset):
    """A StreamingDataset whose samples carry their global sample id."""

    def _samples(self, ids: np.ndarray, refetch_deleted: bool = False) -> Iterator[dict[str, Any]]:
        for sample_id, sample in zip(ids.tolist(), super()._samples(ids, refetch_deleted)):
            yield {**sample, SAMPLE_ID: sample_id}


def check_loader(remote: str | None = None, local: str | None = None, *, version: int | None = None,
                 batch_size: int = 16, num_workers: int = 2, samples_expected: int | None = None,
                 min_samples_per_second: float = 0.0, **dataset_kwargs: Any) -> LoaderCheckReport:
    """Stream the dataset at ``remote`` (through a cache at ``local``) or at ``local`` and check it.

    With a ``remote`` and no ``local``, a temporary cache is used and removed afterwards.
    ``samples_expected`` (default: the dataset's sample count) is how many samples the epoch must
    deliver, each once; ``dataset_kwargs`` go to ``StreamingDataset`` (``shuffle`` defaults to True).
    """
    scratch = tempfile.mkdtemp(prefix="mds-check-loader-") if remote is not None and local is None else None
    try:
        make = _loader_factory(remote, local or scratch, version, batch_size, num_workers,
                               {"shuffle": True, **dataset_kwargs})
        return _run(make, remote or local or "", version, batch_size, num_workers, samples_expected,
                    min_samples_per_second)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _loader_factory(remote: str | None, local: str | None, version: int | None, batch_size: int, num_workers: int,
                    dataset_kwargs: dict[str, Any]) -> Callable[[], StreamingDataLoader]:
    def make() -> StreamingDataLoader:
        dataset = _IdTaggedDataset(remote=remote, local=local, version=version, batch_size=batch_size,
                                   **dataset_kwargs)
        return StreamingDataLoader(dataset, batch_size=batch_size, num_workers=num_workers)

    return make


def _run(make: Callable[[], StreamingDataLoader], location: str, version: int | None, batch_size: int,
         num_workers: int, samples_expected: int | None, min_samples_per_second: float) -> LoaderCheckReport:
    loader = make()
    expected = samples_expected if samples_expected is not None else loader.dataset.num_samples
    report = LoaderCheckReport(location, version, expected, batch_size, num_workers)
    started = time.perf_counter()
    order = [sample_id for batch in loader for sample_id in _ids(batch)]
    report.seconds = time.perf_counter() - started
    report.telemetry = loader.metrics()
    report.samples_streamed, report.distinct = len(order), len(set(order))
    report.samples_per_second = len(order) / report.seconds if report.seconds else 0.0
    counts = Counter(order)
    report.exactly_once = len(order) == expected and set(counts.values()) <= {1} and \
        set(counts) == set(range(loader.dataset.num_samples))
    if not report.exactly_once:
        report.problems.append(f"streamed {report.samples_streamed} samples ({report.distinct} distinct), "
                               f"expected each of {expected} exactly once")
    _check_resume(make, order, batch_size, report)
    if report.samples_per_second < min_samples_per_second:
        report.problems.append(f"throughput {report.samples_per_second:.0f} samples/s is below the required "
                               f"{min_samples_per_second:.0f} samples/s")
    return report


def _check_resume(make: Callable[[], StreamingDataLoader], order: list[int], batch_size: int,
                  report: LoaderCheckReport) -> None:
    """Stop halfway (in whole batches), resume in a fresh loader; the rest must be the uninterrupted rest."""
    stop_after = max(1, len(order) // batch_size // 2)
    first, loader = [], make()
    for step, batch in enumerate(loader):
        first.extend(_ids(batch))
        if step + 1 == stop_after:
            break
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    rest = [sample_id for batch in resumed for sample_id in _ids(batch)]
    report.resumed_at_sample = int(state["sample_in_epoch"]) if state else 0
    report.continuation_matches = first + rest == order
    if not report.continuation_matches:
        report.problems.append(f"resuming at sample {report.resumed_at_sample} gave {len(rest)} samples that "
                               "differ from the uninterrupted epoch's remainder")


def _ids(batch: dict[str, Any]) -> list[int]:
    return [int(value) for value in batch[SAMPLE_ID]]
