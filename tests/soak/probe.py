"""Samples, over time, what the soak's processes hold (RSS, open fds, threads) and what the caches hold on disk.

Read from ``/proc`` (Linux), so nothing is installed and the processes are not disturbed. A
DataLoader worker is found as a child of its rank's process.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_RAW_SHARD = re.compile(r"^shard\.\d+\.mds$")  # a complete raw shard; staged copies end in .tmp


@dataclass
class Sample:
    t: float  # seconds since the probe started
    role: str
    pid: int
    rss_kb: int
    anon_kb: int  # the part of RSS that is not file-backed (mapped shards are file-backed)
    fds: int
    threads: int


@dataclass
class DiskSample:
    t: float
    cache_bytes: int  # complete shard files in the cache directory (what cache_limit bounds)
    staged_bytes: int  # downloads and decompressions in progress (``*.tmp`` beside them)
    tmp_files: int  # ``*.tmp`` files in the cache directory plus every file under the soak's TMPDIR
    job_files: int  # files in the per-job coordination directory


def proc_stats(pid: int) -> tuple[int, int, int, int] | None:
    """(rss kB, anonymous rss kB, open fds, threads) of a live process, or None once it is gone."""
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields.get("State", "").strip().startswith("Z"):
        return None  # exited, not yet reaped: it holds nothing any more

    def kb(name: str) -> int:
        return int(fields.get(name, "0 kB").split()[0])

    return kb("VmRSS"), kb("RssAnon"), fds, int(fields.get("Threads", "0"))


def children_of(parents: set[int]) -> dict[int, int]:
    """pid -> parent pid of every live process whose parent is in ``parents``."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the name may hold spaces and parentheses
        if ppid in parents:
            found[int(entry.name)] = ppid
    return found


def disk_sample(t: float, cache: Path, tmpdir: Path, jobs: Path) -> DiskSample:
    complete = staged = tmp_files = 0
    for path in cache.rglob("*"):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue  # evicted or renamed while we looked
        if path.name.endswith(".tmp"):
            staged += size
            tmp_files += 1
        elif _RAW_SHARD.match(path.name):
            complete += size
    tmp_files += sum(1 for p in tmpdir.rglob("*") if p.is_file())
    job_files = sum(1 for p in jobs.rglob("*") if p.is_file())
    return DiskSample(t, complete, staged, tmp_files, job_files)


@dataclass
class Probe:
    """A thread sampling every ``interval`` seconds until ``stop()``.

    ``roles`` names the processes to follow (pid -> role); children of ``ranks`` (pid -> rank) are
    added as ``rank<R>-w<k>``, numbered in the order they are first seen.
    """

    roles: dict[int, str]
    ranks: dict[int, int]
    cache: Path
    tmpdir: Path
    jobs: Path
    interval: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    disk: list[DiskSample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._start = time.monotonic()
        self.wall_start = time.time()  # to place other processes' wall-clock times on this clock
        self._thread = threading.Thread(target=self._loop, name="soak-probe", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval)

    def sample_once(self) -> None:
        t = time.monotonic() - self._start
        for pid, ppid in sorted(children_of(set(self.ranks)).items()):
            if pid not in self.roles:
                rank = self.ranks[ppid]
                workers = sum(1 for role in self.roles.values() if role.startswith(f"rank{rank}-w"))
                self.roles[pid] = f"rank{rank}-w{workers}"
        for pid, role in list(self.roles.items()):
            stats = proc_stats(pid)
            if stats is not None:
                self.samples.append(Sample(t, role, pid, *stats))
        self.disk.append(disk_sample(t, self.cache, self.tmpdir, self.jobs))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample_once()  # the state at the end, after every reader has exited
