"""The per-day cost of a shard set operated daily: day 2 against day 366 and day 1,001 (issue: flat per-day cost).

The per-day path is the pipeline's: commit the new day (an append), check the new version with the
bounded loader check (``check_version``: the day's shards plus a one-day sample of the older ones,
2 DataLoader workers), publish it. It runs against the loopback S3 server of the tests (moto in its
own process); a proxy in front of it counts every request, the workers' included. For each
history length N, a shard set with N committed daily versions is built (on a local disk, then
copied up: only the per-day path is measured), and the path is timed on it and on fresh sets with
one previous day, interleaved, ``--reps`` times.

    python benchmarks/bench_daily_cost.py [--days 365,1000] [--reps 5] [--rows-per-day 300]
        [--out benchmarks/results-daily-cost-latest.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # testsupport: the tests' S3 server and the per-day path they assert on

from harness import header, spread, write_report

from testsupport.daily_cost import DayCost, daily_path, seed_history
from testsupport.fault_proxy import FaultProxy, apply_env
from testsupport.s3 import MotoServer, s3_env


def measure(server: MotoServer, proxy: FaultProxy, days: int, reps: int, rows: int, jobs: str) -> dict:
    """Day 2 (fresh sets) and day ``days + 1`` (one set with ``days`` versions), interleaved."""
    began = time.perf_counter()
    history = seed_history(server, days, rows)
    seeded = time.perf_counter() - began
    early: list[DayCost] = []
    late: list[DayCost] = []
    for rep in range(reps):
        early.append(daily_path(seed_history(server, 1, rows), proxy, 1, f"{jobs}/early-{days}-{rep}", rows))
        late.append(daily_path(history, proxy, days + rep, f"{jobs}/late-{days}-{rep}", rows))
    return {"days": days, "early": early, "late": late, "seed_seconds": seeded}


def row(result: dict) -> str:
    early, late = result["early"], result["late"]
    req_e, req_l = (statistics.median(c.requests for c in costs) for costs in (early, late))
    sec_e, sec_l = ([c.seconds for c in costs] for costs in (early, late))
    return (
        f"| {result['days']:,} | {req_e:.0f} | {req_l:.0f} | **{req_l / req_e:.2f}×** | "
        f"{spread(sec_e, 2)} | {spread(sec_l, 2)} | "
        f"**{statistics.median(sec_l) / statistics.median(sec_e):.2f}×** | "
        f"{late[-1].checked['total_shards']:,} | {result['seed_seconds']:.0f} |"
    )


def phases(result: dict) -> str:
    """Median seconds of each step, day 2 against the long history: what grows, if anything does."""
    cells = []
    for costs in (result["early"], result["late"]):
        cells.append(
            " / ".join(
                f"{statistics.median(c.phases[name] for c in costs):.2f}" for name in ("commit", "check", "publish")
            )
        )
    return f"| {result['days']:,} | {cells[0]} | {cells[1]} |"


def breakdown(result: dict) -> list[str]:
    """Where the requests went, day 2 against the long history (last repetition of each)."""
    early, late = result["early"][-1].kinds, result["late"][-1].kinds
    lines = [
        f"Requests by kind, day 2 against day {result['days'] + 1:,} (last repetition):",
        "",
        "| request | day 2 | day " + f"{result['days'] + 1:,} |",
        "|---|--:|--:|",
    ]
    for kind in sorted(set(early) | set(late)):
        lines.append(f"| `{kind}` | {early.get(kind, 0)} | {late.get(kind, 0)} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", default="365,1000", help="history lengths, comma-separated")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rows-per-day", type=int, default=300)
    parser.add_argument("--out", default="benchmarks/results-daily-cost-latest.md")
    args = parser.parse_args()
    began = time.perf_counter()
    from mds_core.streaming.loader_check import check_version  # noqa: F401  (torch's import is not a day's cost)

    with tempfile.TemporaryDirectory(prefix="mds-bench-daily-") as work:
        server = MotoServer(Path(work), count_requests=False)  # the FaultProxy below counts
        apply_env(s3_env(server.endpoint))
        proxy = FaultProxy(server.endpoint)
        apply_env({"S3_ENDPOINT_URL": proxy.endpoint})
        try:
            daily_path(seed_history(server, 1, args.rows_per_day), proxy, 1, f"{work}/warm", args.rows_per_day)
            results = [
                measure(server, proxy, int(days), args.reps, args.rows_per_day, f"{work}/jobs")
                for days in args.days.split(",")
            ]
        finally:
            proxy.stop()
            server.stop()
    rows = [
        "| history (days) | requests, day 2 | requests, next day | ratio | seconds, day 2 (median [min–max]) | "
        "seconds, next day | ratio | shards in the version | history built in s |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        *map(row, results),
    ]
    settings = (
        f"{args.rows_per_day} rows a day in one shard (int + str); per day: append commit, check_version "
        f"(sample_rows={args.rows_per_day}, 30 s, batch 16, 2 workers), publish; {args.reps} interleaved "
        "reps; moto server + counting proxy on 127.0.0.1"
    )
    lines = header("Per-day cost of a daily shard set", time.perf_counter() - began, settings) + ["", *rows, ""]
    lines += [
        "Median seconds of each step (commit / check / publish):",
        "",
        "| history (days) | day 2 | next day |",
        "|--:|--:|--:|",
        *map(phases, results),
        "",
    ]
    for result in results:
        lines += breakdown(result)
    write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
