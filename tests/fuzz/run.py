"""The fuzzing campaign: ``python -m tests.fuzz.run --inputs 100000`` (``make fuzz``).

Each target's inputs are cut into chunks that a pool of processes (one per core by default) runs;
input ``i`` depends only on ``(seed, target, i)``, so the split changes nothing. Prints per target
the inputs run, inputs per second and the distinct failures, each with the input number that
reproduces it (``--only TARGET --first N --inputs 1``) and, with ``--save``, a regression file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from tests.fuzz.harness import Stats, limit_memory, run_range, save_regression, scratch_dir
from tests.fuzz.targets import TARGETS, prepared

CHUNK = 2500  # inputs per task: small enough to balance two processes, large enough to amortise a task


def _workdir(root: str, name: str) -> str:
    path = os.path.join(root, f"{name}-{os.getpid()}")  # each process writes its own seed datasets
    os.makedirs(path, exist_ok=True)
    return path


def _chunk(args: tuple[str, str, int, int, int]) -> Stats:
    root, name, seed, start, stop = args
    return run_range(prepared(name, _workdir(root, name)), seed, start, stop)


def _warm(args: tuple[str, str]) -> str:
    root, name = args
    prepared(name, _workdir(root, name))
    return name


def campaign(counts: dict[str, int], seed: int, jobs: int, first: int = 0) -> dict[str, tuple[Stats, float]]:
    """Run ``counts[name]`` inputs of each target; per target its merged stats and wall seconds."""
    results, root = {}, scratch_dir("campaign")
    # Each process caps its own address space (the pytest slice does not: other tests share its process).
    with ProcessPoolExecutor(max_workers=jobs, initializer=limit_memory) as pool:
        for name, inputs in counts.items():
            list(pool.map(_warm, [(root, name)] * jobs))  # setup (writing seed datasets) is not timed as fuzzing
            began = time.perf_counter()
            chunks = [
                (root, name, seed, start, min(start + CHUNK, first + inputs))
                for start in range(first, first + inputs, CHUNK)
            ]
            stats = Stats(name)
            for part in pool.map(_chunk, chunks):
                stats.merge(part)
            results[name] = (stats, time.perf_counter() - began)
            print(_line(stats, results[name][1]), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return results


def _line(stats: Stats, wall: float) -> str:
    return (
        f"{stats.target:<11} {stats.inputs:>8} inputs  {stats.inputs / wall:>7.0f} inputs/s  "
        f"{wall:>6.1f} s  {len(stats.failures)} distinct failures"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per target (a costly target runs a share)")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (input i of a target depends on it)")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: one per core)")
    parser.add_argument("--only", action="append", choices=sorted(TARGETS), help="run only this target (repeatable)")
    parser.add_argument("--first", type=int, default=0, help="number of the first input (to replay one)")
    parser.add_argument("--save", action="store_true", help="keep each distinct failure under tests/fuzz/regressions/")
    args = parser.parse_args(argv)
    jobs = args.jobs or os.cpu_count() or 1
    names = args.only or list(TARGETS)
    # A target named with --only runs exactly --inputs; in a whole campaign, a costly one runs its share of them.
    counts = {
        name: args.inputs if args.only else math.ceil(args.inputs * getattr(TARGETS[name], "share", 1))
        for name in names
    }
    listed = ", ".join(f"{name} ({count})" if count != args.inputs else name for name, count in counts.items())
    print(f"fuzzing {listed}: {args.inputs} inputs each, seed {args.seed}, {jobs} processes", flush=True)
    began = time.perf_counter()
    results = campaign(counts, args.seed, jobs, args.first)
    total = sum(stats.inputs for stats, _ in results.values())
    print(f"total       {total:>8} inputs in {time.perf_counter() - began:.1f} s (setup included)")
    failed = 0
    for name, (stats, _) in results.items():
        for key, example in sorted(stats.failures.items()):
            failed += 1
            print(f"FAIL {name}: {key}\n     input {example['index']}: {example['error'][:300]}")
            if args.save:
                digest = hashlib.sha1(json.dumps(example["case"], sort_keys=True).encode()).hexdigest()[:10]
                print(f"     saved {save_regression(name, f'found-{digest}', example['case'])}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
