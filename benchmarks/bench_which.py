"""How long ``mds which`` takes, and its peak memory, for one step of a 10⁶-, 10⁷- and 10⁸-sample epoch.

Issue 36's target: ``mds which`` for one step of a 10⁸-sample epoch answers without reading a shard,
and its time and memory grow no worse than linearly with the epoch. Each dataset is a synthetic
``index.json`` alone (no shard file exists, so a shard read would fail): shards of 32,768 samples.
Each size runs in a fresh process (peak RSS is that process's), ``--reps`` times; the report gives
the median and range of each question's time, and the peak RSS.

    python benchmarks/bench_which.py [--sizes 1000000,10000000,100000000] [--world 8x8x8] [--out ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Span, fmt, header, median, write_report

from mds_core.format.index import INDEX_BASENAME, FileInfo, ShardInfo, dumps_index
from mds_core.order.spec import OrderSpec
from mds_core.order.world import parse_world
from mds_core.plan.which import EpochOrder, Source, shard_sizes

SHARD_SAMPLES = 32_768
SAMPLE_BYTES = 2048


def write_index(folder: str, samples: int) -> None:
    """An ``index.json`` of ``samples`` samples in shards of ``SHARD_SAMPLES``, and no shard file."""
    sizes = [SHARD_SAMPLES] * (samples // SHARD_SAMPLES) + (
        [samples % SHARD_SAMPLES] if samples % SHARD_SAMPLES else []
    )
    shards = [
        ShardInfo(
            ["tokens"], ["bytes"], [None], None, [], FileInfo(f"shard.{i:05}.mds", n * SAMPLE_BYTES), n, None, None
        )
        for i, n in enumerate(sizes)
    ]
    with open(os.path.join(folder, INDEX_BASENAME), "w", encoding="utf-8") as handle:
        handle.write(dumps_index(shards))


def one_size(samples: int, world_text: str, batch_size: int) -> dict[str, Any]:
    """Both questions on one synthetic dataset, in this process: seconds and peak RSS."""
    with tempfile.TemporaryDirectory() as folder:
        write_index(folder, samples)
        world = parse_world(world_text)
        with Span() as batch_span:  # what `mds which --step` does: read the index, order the epoch, one row
            spec = OrderSpec(shard_sizes=shard_sizes([Source(folder)]), shuffle=True)
            order = EpochOrder(spec, world, batch_size)
            step = order.steps // 2
            ids = order.batch(step)
        with Span() as sample_span:  # `mds which --sample`: a fresh order, then every step that reads it
            order = EpochOrder(OrderSpec(shard_sizes=shard_sizes([Source(folder)]), shuffle=True), world, batch_size)
            seen = order.steps_of(ids[0])
        assert step in [found.step for found in seen]
    return {
        "batch_s": batch_span.seconds,
        "sample_s": sample_span.seconds,
        "peak_mb": max(batch_span.peak_rss_mb, sample_span.peak_rss_mb),
        "steps": order.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000,100000000")
    parser.add_argument("--world", default="8x8x8")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child: one size, JSON out
    parser.add_argument("--out", default="benchmarks/results-which-latest.md")
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_size(args.one, args.world, args.batch_size)))
        return
    began = time.perf_counter()
    rows = [
        "| samples | steps | `--step` s (median) | [min–max] | `--sample` s (median) | [min–max] | peak RSS GiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for samples in (int(size) for size in args.sizes.split(",")):
        runs = [_child(samples, args) for _ in range(args.reps)]
        step_s, sample_s = [r["batch_s"] for r in runs], [r["sample_s"] for r in runs]
        rows.append(
            f"| {samples:,} | {runs[0]['steps']:,} | {fmt(median(step_s), 2)} | {fmt(min(step_s), 2)}–"
            f"{fmt(max(step_s), 2)} | {fmt(median(sample_s), 2)} | {fmt(min(sample_s), 2)}–{fmt(max(sample_s), 2)} | "
            f"{max(r['peak_mb'] for r in runs) / 1024:.2f} |"
        )
    settings = (
        f"synthetic index only (no shard file), shards of {SHARD_SAMPLES:,}; world {args.world}; batch "
        f"{args.batch_size} per rank; py1e shuffle with the loader's default block; {args.reps} reps, a process each"
    )
    text = "\n".join(header("mds which for one step", time.perf_counter() - began, settings) + ["", *rows])
    write_report(text, args.out)


def _child(samples: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", str(samples), "--world", args.world]
    done = subprocess.run([*command, "--batch-size", str(args.batch_size)], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


if __name__ == "__main__":
    main()
