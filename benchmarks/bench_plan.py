"""How long ``mds plan`` takes on a large world: 100M samples, 8 nodes x 8 ranks x 8 workers (issue target: < 30 s).

Only the index matters to the planner, so the dataset is a synthetic index (no shard is written):
100M samples of 2 KiB in shards of 32,768 samples (64 MiB). Each case is timed 3 times in this process;
the report gives the median, the range, CPU seconds and peak RSS.

    python benchmarks/bench_plan.py [--samples 100000000] [--world 8x8x8] [--out benchmarks/results-plan-latest.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Span, fmt, header, median, write_report

from mds_core.format.index import FileInfo, ShardInfo
from mds_core.order.world import parse_world
from mds_core.plan import Environment, plan_training

SHARD_SAMPLES = 32_768
SAMPLE_BYTES = 2048


def synthetic_index(samples: int) -> list[ShardInfo]:
    sizes = [SHARD_SAMPLES] * (samples // SHARD_SAMPLES) + (
        [samples % SHARD_SAMPLES] if samples % SHARD_SAMPLES else []
    )
    return [
        ShardInfo(
            ["tokens"],
            ["bytes"],
            [None],
            None,
            [],
            FileInfo(f"shard.{i:05}.mds", n * SAMPLE_BYTES),
            n,
            SHARD_SAMPLES * SAMPLE_BYTES,
            None,
        )
        for i, n in enumerate(sizes)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100_000_000)
    parser.add_argument("--world", default="8x8x8")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results-plan-latest.md")
    args = parser.parse_args()
    began = time.perf_counter()
    shards, world = synthetic_index(args.samples), parse_world(args.world)
    link = Environment(bandwidth=1.25e9, latency=0.02, consume_seconds=2e-4, startup_seconds=0.2)
    cases: dict[str, dict[str, Any]] = {
        "exact figures only (no environment, no limit)": {},
        "with the time model (1.25 GB/s per node, 0.2 ms/sample)": {"environment": link},
        "with the time model and a 4 GiB cache limit": {"environment": link, "cache_limit": 4 << 30},
    }
    rows = ["| case | wall s (median) | [min–max] | CPU s | peak RSS GiB |", "|---|---|---|---|---|"]
    for name, kwargs in cases.items():
        spans = []
        for _ in range(args.reps):
            with Span() as span:
                plan_training([shards], world, args.batch_size, shuffle=True, **kwargs)
            spans.append(span)
        walls = [s.seconds for s in spans]
        rows.append(
            f"| {name} | {fmt(median(walls), 1)} | {fmt(min(walls), 1)}–{fmt(max(walls), 1)} | "
            f"{fmt(median([s.cpu_seconds for s in spans]), 1)} | {max(s.peak_rss_mb for s in spans) / 1024:.2f} |"
        )
    settings = (
        f"{args.samples:,} samples in {len(shards):,} shards of {SHARD_SAMPLES:,}; world {world}; batch "
        f"{args.batch_size} per rank; py1e shuffle with the loader's default block; {args.reps} reps"
    )
    text = "\n".join(header("mds plan on a large world", time.perf_counter() - began, settings) + ["", *rows])
    write_report(text, args.out)


if __name__ == "__main__":
    main()
