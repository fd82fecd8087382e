"""Epochs and resumption, shared by a rank's process and its DataLoader workers through the job directory.

Each (rank, worker) keeps a small record of the epoch it is iterating: every ``__iter__`` starts the
next epoch, unless a state dict was loaded since its last ``__iter__``, in which case it resumes
that state. A loaded state therefore always applies to the next iteration, even on a dataset object
that has already iterated (the reference silently ignores such a state and restarts).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from mds_core.errors import ResumeError
from mds_core.format.index import INDEX_BASENAME
from mds_core.order.spec import OrderSpec
from mds_core.streaming.jobdir import JobDir

MAX_NODES = 1 << 20  # canonical or physical nodes a state dict may name
STATE_KEYS = ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes")


class OrderState(TypedDict):
    """What the ledger keeps of a loaded state dict (``STATE_KEYS``): where and how to resume."""

    epoch: int
    sample_in_epoch: int
    num_canonical_nodes: int
    shuffle_seed: int
    initial_physical_nodes: int
    schedule: NotRequired[dict[str, Any]]  # a scheduled run's position (mds_core.streaming.scheduled)


class EpochRecord(TypedDict):
    """A worker's record of the epoch it is iterating (``epoch-rank<r>-worker<w>.json``)."""

    epoch: int
    sample_in_epoch: int
    resume_version: int  # the version of the loaded state it started from (0: none)
    state: OrderState | None


class _Loaded(TypedDict):
    """A rank's loaded state (``resume-rank<r>.json``); each load raises the version."""

    version: int
    state: OrderState


@dataclass(frozen=True)
class EpochStart:
    """Where a rank's iteration starts: its epoch, the first sample, and the state it resumes."""

    epoch: int
    sample_in_epoch: int
    state: OrderState | None  # the loaded state this epoch, or an earlier one of this run, resumed


def data_fingerprint(roots: list[str], spec: OrderSpec, versions: list[int | None]) -> str:
    """Identifies the data (each stream's index) and the order settings a state dict is only valid for."""
    digest = hashlib.sha256()
    for root in roots:
        digest.update(index_digest(root))
    settings = [
        spec.mix.choose,
        spec.shuffle,
        spec.shuffle_algo,
        spec.shuffle_block_size,
        spec.sampling_method,
        spec.sampling_granularity,
        spec.partition_algo,
        spec.batching_method,
        spec.replication,
    ]
    digest.update(json.dumps(settings).encode())
    digest.update(json.dumps(versions).encode())
    return digest.hexdigest()[:16]


def index_digest(root: str) -> bytes:
    """The SHA-256 of the ``index.json`` in ``root``: what a state dict checks a stream's data by."""
    with open(os.path.join(root, INDEX_BASENAME), "rb") as handle:
        return hashlib.sha256(handle.read()).digest()


def validate_state(obj: Any, fingerprint: str, epoch_size: int, allow_other_data: bool = False) -> dict[str, Any]:
    """Check a state dict before it is stored, so a bad checkpoint fails at load, not mid-epoch."""
    if not isinstance(obj, dict):
        raise ResumeError(f"a state dict must be a dict, got {type(obj).__name__}")
    missing = [key for key in STATE_KEYS if key not in obj]
    if missing:
        raise ResumeError(f"state dict lacks {missing}; expected the keys {list(STATE_KEYS)}")
    for key in STATE_KEYS:
        if not isinstance(obj[key], int) or isinstance(obj[key], bool):
            raise ResumeError(f"state dict {key!r} must be an int, got {obj[key]!r}")
    # epoch -1 is what a state taken before the first iteration says (as in the reference).
    if (
        obj["epoch"] < -1
        or obj["sample_in_epoch"] < 0
        or obj["num_canonical_nodes"] < 1
        or obj["shuffle_seed"] < 0
        or obj["initial_physical_nodes"] < 1
    ):
        raise ResumeError(f"state dict values out of range: {obj}")
    # The epoch's order holds an array entry per canonical node: an absurd count from a damaged
    # checkpoint would otherwise fail mid-epoch, allocating gigabytes.
    if max(obj["num_canonical_nodes"], obj["initial_physical_nodes"]) > MAX_NODES:
        raise ResumeError(f"state dict node counts are beyond {MAX_NODES}: {obj}; the checkpoint is damaged")
    if obj["sample_in_epoch"] > epoch_size:
        raise ResumeError(
            f"state dict resumes at sample {obj['sample_in_epoch']} but an epoch has only {epoch_size}: "
            "it was taken on a different dataset or epoch_size"
        )
    theirs = obj.get("fingerprint")
    if theirs is not None and theirs != fingerprint and not allow_other_data:
        raise ResumeError(
            f"state dict was taken on different data or order settings (fingerprint {theirs} != {fingerprint}); "
            "resume with the same streams, weights and settings, or pass allow_other_data=True to load_state_dict"
        )
    return dict(obj)


def order_state(state: Mapping[str, Any]) -> OrderState:
    """The ``STATE_KEYS`` of a state dict ``validate_state`` passed, and a scheduled run's position."""
    kept = OrderState(
        epoch=state["epoch"],
        sample_in_epoch=state["sample_in_epoch"],
        num_canonical_nodes=state["num_canonical_nodes"],
        shuffle_seed=state["shuffle_seed"],
        initial_physical_nodes=state["initial_physical_nodes"],
    )
    if "schedule" in state:
        kept["schedule"] = dict(state["schedule"])
    return kept


class EpochLedger:
    """Per-rank records in the job directory: loaded states and each worker's current epoch."""

    def __init__(self, job: JobDir, rank: int) -> None:
        self.job, self.rank = job, rank

    def _worker_file(self, worker: int) -> str:
        return f"epoch-rank{self.rank}-worker{worker}.json"

    def load(self, state: Mapping[str, Any]) -> None:
        """Store ``state`` (its ``STATE_KEYS``) for the next ``__iter__`` of every worker of this rank."""
        name = f"resume-rank{self.rank}.json"
        previous = self._loaded()
        version = (previous["version"] if previous else 0) + 1
        self.job.write_json(name, _Loaded(version=version, state=order_state(state)))

    def position(self) -> tuple[int, int, OrderState | None]:
        """(epoch, first sample, state it resumed) of this rank's iteration.

        A pending loaded state's, else the latest epoch's; ``(-1, 0, None)`` before any.
        """
        pending, current = self.pending_state(), self.current()
        if pending is not None:
            return pending["epoch"], pending["sample_in_epoch"], pending
        if current is not None:
            return current["epoch"], current["sample_in_epoch"], current["state"]
        return -1, 0, None

    def _loaded(self) -> _Loaded | None:
        loaded: _Loaded | None = self.job.read_json(f"resume-rank{self.rank}.json")  # as load writes it
        return loaded

    def pending_state(self) -> OrderState | None:
        """The loaded state no worker has started from yet, if any."""
        loaded = self._loaded()
        if loaded is None:
            return None
        consumed = [record.get("resume_version", 0) for record in self._records()]
        return loaded["state"] if not consumed or max(consumed) < loaded["version"] else None

    def start_epoch(self, worker: int) -> EpochStart:
        """Called by each worker at ``__iter__``: which epoch, from which sample."""
        record: EpochRecord = self.job.read_json(self._worker_file(worker)) or EpochRecord(
            epoch=-1, sample_in_epoch=0, resume_version=0, state=None
        )
        loaded = self._loaded()
        if loaded is not None and loaded["version"] > record["resume_version"]:
            state = loaded["state"]
            start = EpochStart(state["epoch"], state["sample_in_epoch"], state)
            version = loaded["version"]
        else:
            # A later epoch keeps a resumed state's canonical nodes, seed and initial node count, as
            # the reference does; only the position starts afresh.
            start = EpochStart(record["epoch"] + 1, 0, record.get("state"))
            version = record["resume_version"]
        self.job.write_json(
            self._worker_file(worker),
            EpochRecord(
                epoch=start.epoch, sample_in_epoch=start.sample_in_epoch, resume_version=version, state=start.state
            ),
        )
        return start

    def current(self) -> EpochRecord | None:
        """The latest epoch record among this rank's workers (what ``state_dict`` reports)."""
        records = self._records()
        return max(records, key=lambda r: (r["epoch"], r.get("resume_version", 0))) if records else None

    def _records(self) -> list[EpochRecord]:
        pattern = os.path.join(self.job.path, f"epoch-rank{self.rank}-worker*.json")
        records: list[EpochRecord | None] = [self.job.read_json(os.path.basename(path)) for path in glob.glob(pattern)]
        return [r for r in records if r is not None]


def check_versions(
    state: Any, ours: list[int | None], allow_other_data: bool, roots: Sequence[str] | None = None
) -> None:
    """Check a state's ``versions`` (the shard-set version of each stream).

    They must be well formed and, for pinned versions, those this dataset reads, unless ``allow_other_data``.

    Args:
        state: the state dict being loaded.
        ours: the version each of this dataset's streams reads (None: not pinned).
        allow_other_data: accept other versions (the caller's ``load_state_dict`` argument).
        roots: each stream's root as messages name it (``lineage.stream_root``), to say which stream differs.
    """
    theirs: Any = state.get("versions") if isinstance(state, dict) else None
    if theirs is not None and not (
        isinstance(theirs, list) and all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in theirs)
    ):
        raise ResumeError(f"state dict 'versions' must be a list of shard-set versions (ints or nulls), got {theirs!r}")
    pinned = theirs is not None and any(v is not None for v in [*theirs, *ours])
    if pinned and theirs != ours and not allow_other_data:
        raise ResumeError(
            f"state dict was taken on shard-set version(s) {theirs}, but this dataset reads {ours}"
            f"{_which_differ(theirs, ours, roots)}; "
            "resume on the same version, or pass allow_other_data=True to load_state_dict to continue anyway"
        )


def _which_differ(theirs: Any, ours: list[int | None], roots: Sequence[str] | None) -> str:
    """`` (stream 0 at <root>: version 1 in the state, 2 here)`` for each stream whose version differs."""
    if roots is None or len(theirs) != len(ours):
        return ""
    differing = [
        f"stream {i} at {root}: version {mine if mine is not None else 'unpinned'} in the state, "
        f"{here if here is not None else 'unpinned'} here"
        for i, (root, mine, here) in enumerate(zip(roots, theirs, ours))
        if mine != here
    ]
    return f" ({'; '.join(differing)})"
