"""The per-day path of a shard set operated daily, and what it costs at a proxy that counts requests.

The per-day path is what the pipeline does each day: commit the new day (an append), check the new
version with the bounded loader check (``check_version``: the new shards plus a bounded sample of
the older ones), then publish it. ``tests/versions/test_daily_cost.py`` asserts that day 366 costs
what day 2 costs; ``benchmarks/bench_daily_cost.py`` reports it after 365 and 1,000 days.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mds_core import MDSWriter
from mds_core.versions import ShardSet

ROWS_PER_DAY = 300
COLUMNS = {"id": "int", "day": "str"}


@dataclass
class DayCost:
    """One run of the per-day path: requests at the proxy, wall seconds, and the check's report."""

    version: int
    requests: int
    seconds: float
    kinds: Counter = field(default_factory=Counter)  # requests by method and kind of object
    checked: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # seconds of commit, check and publish


def write_day(out: str, day: int, rows: int = ROWS_PER_DAY) -> None:
    """One day of rows: a single small shard."""
    with MDSWriter(out=out, columns=COLUMNS) as writer:
        for i in range(rows):
            writer.write({"id": day * rows + i, "day": f"day {day}"})


def build_history(local_root: str, days: int, rows: int = ROWS_PER_DAY) -> None:
    """``days`` daily appends on a local disk (about 30 ms each, against 0.6 s each on the S3 server)."""
    shard_set = ShardSet(local_root)
    for day in range(days):
        with shard_set.transaction("append", publish=days - 1 == day) as tx:
            write_day(tx.out, day, rows)


def upload_tree(local_root: str, endpoint: str, bucket: str, prefix: str, threads: int = 8) -> int:
    """Copy a local shard set to ``s3://bucket/prefix`` as is (its names are relative to the root); files copied."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    files = [Path(folder) / name for folder, _, names in os.walk(local_root) for name in names]

    def put(path: Path) -> None:
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/{path.relative_to(local_root).as_posix()}", Body=path.read_bytes()
        )

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, files))
    return len(files)


def seed_history(server: Any, days: int, rows: int = ROWS_PER_DAY) -> str:
    """A fresh ``s3://`` root holding ``days`` committed daily versions, the last one published.

    The history is committed on a local disk and copied up, which gives the same objects as
    committing on the server at a twentieth of the time; only the per-day path is measured.
    """
    bucket = server.new_bucket()
    with tempfile.TemporaryDirectory(prefix="mds-daily-history-") as local:
        build_history(os.path.join(local, "set"), days, rows)
        upload_tree(os.path.join(local, "set"), server.endpoint, bucket, "set")
    return f"s3://{bucket}/set"


def daily_path(
    root: str, proxy: Any, day: int, job_root: str, rows: int = ROWS_PER_DAY, num_workers: int = 2
) -> DayCost:
    """Commit day ``day``, check the new version (bounded), publish it; what it cost at the proxy."""
    from mds_core.streaming.loader_check import check_version  # imports torch

    before = len(proxy.requests)
    marks = [time.perf_counter()]
    shard_set = ShardSet(root)
    with shard_set.transaction("append", publish=False) as tx:
        write_day(tx.out, day, rows)
    assert tx.version is not None  # the block ended without an error: the version is committed
    version = tx.version.version
    marks.append(time.perf_counter())
    report = check_version(root, version, sample_rows=rows, batch_size=16, num_workers=num_workers, job_root=job_root)
    if not report.passed:  # a failed check is no day of the path: its cost would be wrong
        raise AssertionError(report.problems)
    marks.append(time.perf_counter())
    shard_set.publish(version)
    marks.append(time.perf_counter())
    made = proxy.requests[before:]
    phases = {name: end - start for name, start, end in zip(("commit", "check", "publish"), marks, marks[1:])}
    return DayCost(
        version, len(made), marks[-1] - marks[0], Counter(_kind(m, p) for m, p in made), report.subset, phases
    )


def _kind(method: str, path: str) -> str:
    """``GET list _versions``, ``PUT data``, ``HEAD _versions``...: where a request went."""
    path, _, query = path.partition("?")
    if "list-type" in query:
        prefix = query.split("prefix=", 1)[1].split("&", 1)[0] if "prefix=" in query else ""
        # s3fs asks "is it a directory?" (a one-key listing) after a key turned out absent
        what = "probe" if "max-keys=1&" in f"{query}&" else "list"
        return f"{method} {what} {'_versions' if '_versions' in prefix else 'data'}"
    parts = path.strip("/").split("/")[2:]  # after bucket and the set's prefix
    return f"{method} {parts[0] if parts else '?'}"


def day_two(server: Any, proxy: Any, job_root: str) -> DayCost:
    """The per-day path on a fresh shard set with one previous day."""
    root = seed_history(server, 1)
    return daily_path(root, proxy, 1, job_root)


def describe(label: str, costs: list[DayCost]) -> str:
    seconds = [c.seconds for c in costs]
    phases = {name: round(statistics.median(c.phases[name] for c in costs), 3) for name in costs[0].phases}
    return (
        f"{label}: versions {[c.version for c in costs]}, requests {[c.requests for c in costs]}, seconds "
        f"{[round(s, 3) for s in seconds]} (median {statistics.median(seconds):.3f}; {phases}); "
        f"{dict(sorted(costs[-1].kinds.items()))}"
    )
