"""What the streaming tests share: the reference's order fixtures, small datasets, subprocesses and epochs."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from mds_core import MDSWriter, Stream, StreamingDataset
from testsupport.fault_proxy import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ORDER = FIXTURES / "order-golden"
MDS = str(Path(sys.executable).parent / "mds")
RANK_WORKER = Path(__file__).with_name("distributed_worker.py")


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


_ANONYMOUS_GROWTH = """
import sys
def anonymous_kib():
    return int(open("/proc/self/smaps_rollup").read().split("Anonymous:")[1].split()[0])
{setup}
before = anonymous_kib()
{measured}
print((anonymous_kib() - before) / 1024)
"""


def anonymous_growth_mib(setup: str, measured: str, *args: str) -> float:
    """MiB of anonymous memory a fresh interpreter still holds after running ``measured`` (after ``setup``)."""
    done = run_python(_ANONYMOUS_GROWTH.format(setup=setup, measured=measured), *args)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout)


def run_ranks(tmp_path: Path, num_ranks: int, ranks_per_node: int, config: dict) -> list[dict]:
    """Start every rank as its own process and return each rank's output."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    port, procs, outs = free_port(), [], []
    for rank in range(num_ranks):
        config_path, out = tmp_path / f"config{rank}.json", tmp_path / f"out{rank}-{port}.json"
        config_path.write_text(json.dumps(config))
        world = {"RANK": rank, "WORLD_SIZE": num_ranks, "LOCAL_RANK": rank % ranks_per_node}
        world.update(LOCAL_WORLD_SIZE=ranks_per_node, MASTER_PORT=port)
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", **{name: str(value) for name, value in world.items()}}
        command = [sys.executable, str(RANK_WORKER), str(config_path), str(out)]
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(out)
    logs = [proc.communicate(timeout=300)[0] for proc in procs]
    # Every rank's log: the rank that fails first is usually not the one that reports the failure.
    assert [proc.returncode for proc in procs] == [0] * num_ranks, "\n".join(
        f"--- rank {rank} ---\n{log[-3000:]}" for rank, log in enumerate(logs)
    )
    return [json.loads(out.read_text()) for out in outs]


def rank_config(tmp_path: Path, batch_size: int, num_workers: int, **extra: Any) -> dict:
    """The rank worker's config: three streams, shuffled on 2 canonical nodes, ``extra`` on top."""
    return {
        "streams": [["s0", {}], ["s1", {}], ["s2", {}]],
        "batch_size": batch_size,
        "num_workers": num_workers,
        "job_root": str(tmp_path / "jobs"),
        "dataset_kwargs": {"shuffle": True, "num_canonical_nodes": 2},
        **extra,
    }


def global_batches(outputs: list[dict]) -> list[list[int]]:
    """Step t's global batch: every rank's t-th batch, in rank order."""
    steps = max(len(o["batches"]) for o in outputs)
    return [sum((o["batches"][t] for o in outputs if t < len(o["batches"])), []) for t in range(steps)]


def memory_owner(array: np.ndarray) -> object:
    """What holds an array's memory: None when numpy allocated it (a copy), else the buffer it views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.base
