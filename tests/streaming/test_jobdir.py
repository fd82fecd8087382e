"""The per-job directory: private per user, compute-once shared arrays, crash leftovers swept."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mds_core.streaming.jobdir import OWNER_FILE, JobDir, new_job_token, user_dir
from tests.streaming.support import anonymous_growth_mib, run_python


def _compute_in_child(root: str, token: str, marker: str, out) -> None:
    job = JobDir.attach(root, token)

    def compute() -> np.ndarray:
        with open(marker, "a") as handle:  # counts how many processes really computed
            handle.write("x")
        return np.arange(1000, dtype=np.int64)

    out.put(int(job.shared_array("work-e0", compute).sum()))


def test_shared_array_is_computed_once_across_processes(tmp_path: Path) -> None:
    token = new_job_token()
    job = JobDir.create(str(tmp_path), token)
    marker = str(tmp_path / "computed")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_compute_in_child, args=(str(tmp_path), token, marker, out)) for _ in range(4)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(60)
    assert results == [499500] * 4
    assert Path(marker).read_text() == "x"
    assert not job.shared_array("work-e0", lambda: np.zeros(1)).flags.writeable


def test_a_shared_array_removed_before_it_is_loaded_is_computed_again(tmp_path, monkeypatch) -> None:
    # A worker further ahead removes a pass it believes done with, between another's check and its load.
    job = JobDir.create(str(tmp_path), new_job_token())
    job.shared_array("pass-0", lambda: np.arange(5))
    real_load = np.load
    removals: list[str] = []

    def load_after_a_removal(path: str, **kwargs):
        if not removals:
            removals.append(path)
            os.unlink(path)
        return real_load(path, **kwargs)

    monkeypatch.setattr(np, "load", load_after_a_removal)
    assert job.shared_array("pass-0", lambda: np.arange(5) * 2).tolist() == [0, 2, 4, 6, 8]  # recomputed
    assert removals == [job.file("pass-0.npy")]


def _create_in_child(root: Path, token: str, then: str) -> str:
    """What a fresh interpreter prints that creates job ``token`` under ``root`` as ``job``, then runs ``then``."""
    code = f"import os; from mds_core.streaming.jobdir import JobDir; job = JobDir.create({str(root)!r}, {token!r}); "
    return run_python(code + then, check=True).stdout.strip()


def test_job_dirs_are_per_user_and_removed_with_their_creator(tmp_path: Path) -> None:
    path = _create_in_child(tmp_path, "tok", "print(job.path)")
    assert path.startswith(user_dir(str(tmp_path))) and not os.path.exists(path)


def test_a_crashed_jobs_directory_is_swept_by_the_next_job(tmp_path: Path) -> None:
    _create_in_child(tmp_path, "crashed", "os._exit(0)")  # no clean-up: a crash
    crashed = Path(user_dir(str(tmp_path))) / "crashed"
    assert (crashed / OWNER_FILE).exists()
    JobDir.create(str(tmp_path), "next")
    assert not crashed.exists()


def test_forked_children_do_not_remove_the_parents_directory(tmp_path: Path) -> None:
    job = JobDir.create(str(tmp_path), "parent")
    proc = mp.get_context("fork").Process(target=job.cleanup)  # what a worker's exit would run
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0 and os.path.isdir(job.path)
    job.cleanup()
    assert not os.path.exists(job.path)


def test_the_directory_outlives_its_creator_while_another_rank_uses_it(tmp_path: Path) -> None:
    leader = JobDir.create(str(tmp_path), "shared")
    code = (
        f"import sys; from mds_core.streaming.jobdir import JobDir; j = JobDir.attach({str(tmp_path)!r}, 'shared'); "
        "sys.stdin.readline(); j.write_json('late.json', {'ok': True})"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    while not any(name.endswith(f"-{other.pid}") for name in os.listdir(Path(leader.path) / "users")):
        other.poll()
        assert other.returncode is None
        time.sleep(0.01)
    leader.cleanup()  # the creating rank finishes first
    assert os.path.isdir(leader.path)
    other.communicate("go\n", timeout=60)
    assert other.returncode == 0 and not os.path.exists(leader.path)  # the last user removed it


_CREATE_MANY = """
import os, sys
from mds_core.streaming.jobdir import JobDir, new_job_token
jobs = []
for _ in range(int(sys.argv[2])):
    job = JobDir.create(sys.argv[1], new_job_token())
    jobs.append(job)
    job.write_json("alive.json", {})  # fails if another job's sweep removed this directory
lost = [job.path for job in jobs if not os.path.isdir(job.path)]
print(len(lost))
"""


def test_jobs_starting_side_by_side_never_sweep_each_other(tmp_path: Path) -> None:
    # Every create sweeps crashed jobs first; a job that is still starting must not look crashed.
    command = [sys.executable, "-c", _CREATE_MANY, str(tmp_path), "150"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [(proc.returncode, out.strip()) for proc, (out, _) in zip(procs, results)] == [(0, "0")] * 3, [
        err[-2000:] for _, err in results
    ]


# Ten million samples' order, computed through a shared array in a fresh interpreter.
_ORDER_SPEC = """
from mds_core.order import OrderSpec, generate_work
from mds_core.streaming.jobdir import JobDir
spec = OrderSpec(shard_sizes=[[10_000] * 1_000], shuffle=True, shuffle_seed=17, num_canonical_nodes=8, batch_size=256)
"""
_SHARED_ORDER = 'work = JobDir(sys.argv[1]).shared_array("work", lambda: generate_work(spec, 1, 8, 2, 0))'


def test_the_process_that_computes_a_shared_array_keeps_none_of_its_temporaries(tmp_path: Path) -> None:
    # glibc keeps freed heap pages once a large free has raised its mmap threshold: the worker that computed the
    # order of 10**8 samples kept 18 MiB for the rest of the run, 9.8 MiB at 10**6 (the result is a mapped file).
    # It also keeps the top of each thread's arena: the shuffle's threads each kept their gather's temporary
    # (8 MiB in all at 10**7 samples) until the gather's buffers were made on the calling thread.
    grown = anonymous_growth_mib(_ORDER_SPEC, _SHARED_ORDER, str(tmp_path))
    assert grown < 3, f"the computing process kept {grown:.1f} MiB"
