"""What a mixing schedule costs (issue 37's targets): iterating a 3-stream scheduled mix against the same streams
mixed by proportion without a schedule, and resuming a 10⁸-sample scheduled run at step 10⁶ against step 10.

Iteration: three local streams of token rows (300k, 200k, 100k samples of 32 int32 plus an id), shuffled,
batch 256; one epoch of about 600k samples, in the rank process and through a StreamingDataLoader with 2
workers, every payload byte copied by the harness's consumer. The scheduled mix has three phases (weights
0.5/0.3/0.2, then 0.2/0.3/0.5, then 0.4/0.4/0.2); the plain mix has proportions 0.5/0.3/0.2. Each run
is a fresh process; figures are medians of ``--reps``, samples/s, with the process tree's CPU seconds.

Resume: the order alone (no shard is read: the first batch's ids are what a resume computes), for a world
of 8 ranks x 8 workers and a global batch of 2,048, over three streams of 5·10⁷, 3·10⁷ and 2·10⁷
samples in 10⁴ shards, py1e. Time from a loaded state to worker 0's first batch of rank 0, with each
stream's current pass shuffled, and peak RSS, in fresh processes.

    python benchmarks/bench_schedule.py [--reps 3] [--out benchmarks/results-schedule-latest.md]
    python benchmarks/bench_schedule.py --quick    # one repetition, a tenth of the data (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from harness import Consumer, Span, fmt, header, median, median_of, tree_cpu_seconds, write_report

STREAMS = {"web": 300_000, "code": 200_000, "math": 100_000}
BATCH = 256
PLAIN = {"web": 0.5, "code": 0.3, "math": 0.2}
PHASES = [
    {"web": 0.5, "code": 0.3, "math": 0.2},
    {"web": 0.2, "code": 0.3, "math": 0.5},
    {"web": 0.4, "code": 0.4, "math": 0.2},
]
RESUME_STREAMS = {"web": 50_000_000, "code": 30_000_000, "math": 20_000_000}
RESUME_SHARDS = 10_000
RESUME_WORLD = (8, 8)  # ranks, workers per rank
RESUME_GLOBAL_BATCH = 2048


def write_streams(root: Path, scale: float) -> None:
    from mds_core import MDSWriter

    rng = np.random.default_rng(0)
    for name, count in STREAMS.items():
        count = int(count * scale)
        with MDSWriter(out=str(root / name), columns={"id": "int64", "tokens": "ndarray:int32:32"}) as writer:
            for i in range(count):
                writer.write({"id": i, "tokens": rng.integers(0, 50_000, 32, dtype=np.int32)})


def iterate(root: str, mode: str, workers: int, scale: float) -> dict[str, float]:
    """One epoch of the plain or the scheduled mix; runs in a fresh process."""
    import torch  # noqa: F401  (StreamingDataset is a torch IterableDataset once torch is loaded)

    from mds_core import Phase, Schedule, Stream, StreamingDataLoader, StreamingDataset

    samples = int(sum(STREAMS.values()) * scale)
    if mode == "plain":
        streams = [Stream(local=f"{root}/{n}", proportion=PLAIN[n]) for n in STREAMS]
        extra: dict[str, Any] = {}
    else:
        steps = samples // BATCH
        phases = [Phase(start=i * steps // 3, weights=w) for i, w in enumerate(PHASES)]
        streams = [Stream(local=f"{root}/{n}", name=n) for n in STREAMS]
        extra = {"schedule": Schedule(phases)}
    with tempfile.TemporaryDirectory() as jobs:
        dataset = StreamingDataset(
            streams=streams, batch_size=BATCH, shuffle=True, epoch_size=samples, job_root=jobs, **extra
        )
        consume, count = Consumer(), 0
        cpu0 = tree_cpu_seconds()
        began = time.perf_counter()
        if workers:
            for batch in StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers, persistent_workers=False):
                consume(batch)
                count += len(batch["id"])
        else:
            for sample in dataset:
                consume(sample)
                count += 1
        seconds = time.perf_counter() - began
        cpu = tree_cpu_seconds() - cpu0
    return {"samples": count, "seconds": seconds, "cpu_seconds": cpu, "consumed": consume.consumed}


def resume(step: int, scale: float) -> dict[str, float]:
    """Worker 0's first batch after loading a state at ``step``; runs in a fresh process."""
    from mds_core.order.schedule import Phase, Position, Schedule
    from mds_core.order.spec import OrderSpec
    from mds_core.order.world import World
    from mds_core.streaming.scheduled import ScheduledEpochs

    per_stream = RESUME_SHARDS // len(RESUME_STREAMS)
    sizes = [[int(n * scale) // per_stream] * per_stream for n in RESUME_STREAMS.values()]
    names = list(RESUME_STREAMS)
    ranks, workers = RESUME_WORLD
    schedule = Schedule([Phase(0, PHASES[0]), Phase(400_000, PHASES[1]), Phase(800_000, PHASES[2])])
    spec = OrderSpec(shard_sizes=sizes, weights=[None] * 3, shuffle=True)
    with Span() as span:
        world = World(1, ranks, 0, workers, 0)
        epochs = ScheduledEpochs(schedule, names, spec, world, RESUME_GLOBAL_BATCH // ranks, None)
        base = {"schedule": {"step": step, "given": dict(epochs.order.advance(Position(0, {}), step).given)}}
        resumed = epochs.resume(
            {**base, "schedule": {**base["schedule"], "global_batch_size": epochs.global_batch}}, [], True
        )
        row = epochs.row(world, resumed["epoch"], resumed["sample_in_epoch"], resumed)
        first = row[: RESUME_GLOBAL_BATCH // ranks]
    assert len(first) == RESUME_GLOBAL_BATCH // ranks
    return {"seconds": span.seconds, "cpu_seconds": span.cpu_seconds, "peak_rss_mb": span.peak_rss_mb}


def child(args: list[str | float]) -> dict[str, float]:
    command = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(args)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repetition on a tenth of the data")
    parser.add_argument("--out", default="benchmarks/results-schedule-latest.md")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = json.loads(args.child)
        print(json.dumps(iterate(*rest) if kind == "iterate" else resume(*rest)))
        return
    scale, reps = (0.1, 1) if args.quick else (1.0, args.reps)
    began = time.perf_counter()
    lines = ["## Iterating a 3-stream mix: scheduled against plain (proportions)", ""]
    lines += [
        "| reader | plain samples/s | scheduled samples/s | scheduled / plain | CPU s plain / scheduled |",
        "|---|--:|--:|--:|--:|",
    ]
    with tempfile.TemporaryDirectory() as root:
        write_streams(Path(root), scale)
        for workers in (0, 2):
            runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in ("plain", "scheduled")}
            for _ in range(reps):  # interleaved, so that drift on the machine hits both alike
                for mode in runs:
                    runs[mode].append(child(["iterate", root, mode, workers, scale]))
            rate = {m: median_of([r["samples"] / r["seconds"] for r in rs]) for m, rs in runs.items()}
            cpu = {m: median([r["cpu_seconds"] for r in rs]) for m, rs in runs.items()}
            reader = "rank process" if not workers else f"StreamingDataLoader, {workers} workers"
            lines.append(
                f"| {reader} | {fmt(rate['plain'])} | {fmt(rate['scheduled'])} | "
                f"{rate['scheduled'] / rate['plain']:.3f} (target ≥ 0.95) | {fmt(cpu['plain'], 2)} / {fmt(cpu['scheduled'], 2)} |"
            )
    lines += ["", "## Resuming a 10⁸-sample scheduled run", ""]
    lines += [
        "| resumed at | to the first batch, s (median) | [min–max] | CPU s | peak RSS MiB |",
        "|---|--:|--:|--:|--:|",
    ]
    results: dict[int, float] = {}
    for step in (10, 1_000_000):
        resumes = [child(["resume", step, scale]) for _ in range(reps)]
        walls = [r["seconds"] for r in resumes]
        results[step] = median_of(walls)
        lines.append(
            f"| step {step:,} | {fmt(median(walls), 2)} | {fmt(min(walls), 2)}–{fmt(max(walls), 2)} | "
            f"{fmt(median([r['cpu_seconds'] for r in resumes]), 2)} | {fmt(max(r['peak_rss_mb'] for r in resumes))} |"
        )
    lines.append(f"\nstep 10⁶ / step 10: {results[1_000_000] / results[10]:.3f} (target ≤ 1.10)")
    settings = f"{reps} fresh process(es) per figure, data x{scale}; see the module docstring for the data"
    write_report("\n".join(header("Mixing schedules", time.perf_counter() - began, settings) + lines), args.out)


if __name__ == "__main__":
    main()
