"""What the streaming tests share: the reference's order fixtures, small datasets, subprocesses and epochs."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mds_core import MDSWriter, Stream, StreamingDataset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ORDER = FIXTURES / "order-golden"
MDS = str(Path(sys.executable).parent / "mds")


def write_rows(out: Path | str, columns: dict[str, str], rows: Iterable[dict[str, Any]], **kwargs: Any) -> Path:
    """``rows`` written as an MDS dataset at ``out`` (``kwargs`` go to ``MDSWriter``); returns a local ``out``."""
    with MDSWriter(out=str(out), columns=columns, **kwargs) as writer:
        for row in rows:
            writer.write(row)
    return Path(out)


def write_ids(out: Path | str, count: int, **kwargs: Any) -> Path:
    """A dataset of one ``id`` column, 0 to ``count - 1``."""
    return write_rows(out, {"id": "int"}, ({"id": i} for i in range(count)), **kwargs)


def three_streams(job_root: Path, **kwargs: Any) -> StreamingDataset:
    """The order fixtures' 420 samples in 9 shards over three local streams (batch size 4 unless given)."""
    streams = [Stream(local=str(ORDER / "datasets" / name)) for name in ("s0", "s1", "s2")]
    return StreamingDataset(streams=streams, job_root=str(job_root), **{"batch_size": 4, **kwargs})


def ids(samples: Iterable[dict[str, Any]]) -> list[int]:
    """The ``id`` of each sample, in order (one epoch when given a dataset)."""
    return [int(sample["id"]) for sample in samples]


def batch_ids(loader: Iterable[dict[str, Any]]) -> list[list[int]]:
    """The ``id`` column of each batch, in order (one epoch when given a loader)."""
    return [batch["id"].tolist() for batch in loader]


def first_batches(loader: Iterable[dict[str, Any]], count: int) -> list[list[int]]:
    """The ``id`` column of the loader's first ``count`` batches: the loader stops there, mid-epoch."""
    return batch_ids(itertools.islice(loader, count))


def run(*command: str, timeout: float = 300, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A command run to its end with its output captured as text."""
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, **kwargs)


def run_python(code: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter of this environment, with ``args`` as its ``sys.argv[1:]``."""
    return run(sys.executable, "-c", code, *args, **kwargs)
