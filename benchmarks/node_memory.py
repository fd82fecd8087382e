"""A node's memory for ``bench_scale.py``: every process's own pages, and the run's shared files once each."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any


def node_processes(procs: list[subprocess.Popen[str]]) -> list[Any]:
    """The ranks and all their descendants (DataLoader workers), as psutil processes."""
    import psutil

    ranks = [psutil.Process(proc.pid) for proc in procs]
    return [p for rank in ranks for p in [rank, *rank.children(recursive=True)]]


def private_bytes(processes: list[Any], shared: tuple[str, ...]) -> int:
    """The PSS of these processes, leaving out mappings of ``shared``.

    PSS counts a page shared by n processes as 1/n in each, so forked workers' copy-on-write pages
    count once; the run's shared files are left out here and counted whole by ``shared_bytes``.
    """
    import psutil

    total = 0
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):  # a worker that has just ended
            total += sum(m.pss for m in proc.memory_maps() if not m.path.startswith(shared))
    return total


def peak_bytes(processes: list[Any]) -> int:
    """The largest peak RSS (``VmHWM``) of these processes: the one that built the epoch's order, say."""
    peaks = [0]
    for proc in processes:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peaks += [int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")]
    return max(peaks)


def shared_bytes(jobs: Path, shm_before: set[str]) -> int:
    """The memory held by the run's shared files: its new /dev/shm segments (Mosaic) and its job folder (mds_core)."""
    shm = Path("/dev/shm")
    files = [shm / name for name in set(os.listdir(shm)) - shm_before]
    files += [path for path in jobs.rglob("*") if path.is_file()] if jobs.exists() else []
    total = 0
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_blocks * 512
    return total


def node_bytes(processes: list[Any], jobs: Path, shm_before: set[str]) -> int:
    """The node's memory for this run: every process's own pages, and the run's shared files once each."""
    shared = ("/dev/shm/", f"{jobs}/")
    return private_bytes(processes, shared) + shared_bytes(jobs, shm_before)
