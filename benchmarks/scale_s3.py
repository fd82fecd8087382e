"""The loopback S3 of ``bench_scale.py --store s3``: moto, each dataset uploaded once, its requests counted.

The ranks talk to moto directly (no proxy in the benchmark's process shares the timings); moto's
access log, one line per request it answered, is read back as a node's index GETs, shard GETs and
the rest. moto runs in the project's environment (``benchmarks/.venv`` does not have it), and so do
mds_core's ranks on this store: their S3 client (s3fs) is installed there, as in ``bench_remote.py``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # testsupport: the tests' S3 server

import harness

from testsupport.s3 import MotoServer, s3_env

PROJECT_PYTHON = str(ROOT / ".venv" / "bin" / "python")
# werkzeug's access log: 127.0.0.1 - - [date] "GET /bucket/key HTTP/1.1" 200 -
_ACCESS_LINE = re.compile(r'"([A-Z]+) (\S+) HTTP/[0-9.]+" \d{3}')


class ScaleS3:
    """One moto server and bucket for the whole run; ``url(root)`` uploads ``root`` the first time."""

    def __init__(self, work: Path) -> None:
        import boto3

        self.server = MotoServer(work, count_requests=False, python=PROJECT_PYTHON)
        os.environ.update(s3_env(self.server.endpoint))  # this process's clients, and every rank's
        self.bucket = self.server.new_bucket()
        self.client = boto3.client("s3", endpoint_url=self.server.endpoint, region_name="us-east-1")
        self.uploaded: set[str] = set()

    def url(self, root: Path) -> str:
        """``root``'s dataset on the store, uploaded on first use."""
        if root.name not in self.uploaded:
            print(f"uploading {root.name} to the loopback S3", file=sys.stderr)
            for path in sorted(root.iterdir()):
                self.client.upload_file(str(path), self.bucket, f"{root.name}/{path.name}")
            self.uploaded.add(root.name)
        return f"s3://{self.bucket}/{root.name}"

    def mark(self) -> int:
        """The position in moto's access log: pass it to ``requests_since`` after the run."""
        return self.server.log_path.stat().st_size

    def requests_since(self, mark: int) -> dict[str, Any]:
        """The node's requests after ``mark``: index GETs, shard GETs (and distinct shards), the rest."""
        with open(self.server.log_path, "rb") as log:
            log.seek(mark)
            answered = [m.groups() for m in _ACCESS_LINE.finditer(log.read().decode(errors="replace"))]
        gets = [path for method, path in answered if method == "GET" and "list-type" not in path]
        shards = [path for path in gets if path.endswith(".mds") or ".mds." in path]
        index = sum(path.endswith("/index.json") for path in gets)
        return dict(
            index_gets=index,
            shard_gets=len(shards),
            distinct_shards=len(set(shards)),
            other_requests=len(answered) - index - len(shards),
        )

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def request_table(
    results: dict[tuple[int, str, str], list[dict[str, Any]]],
    sizes: list[tuple[int, int]],
    points: Iterable[str],
    names: dict[str, str],
) -> list[str]:
    """The report's lines on the node's requests from the signal to the last first batch (medians)."""
    lines = [
        "",
        "Requests of the node (8 ranks and their workers) from the signal to the last rank's first batch, medians:",
        "",
        "| samples (shards) | point | library | index GETs | shard GETs (distinct shards) | other requests |",
        "|---|---|---|--:|--:|--:|",
    ]
    for samples, shards in sizes:
        for point in points:
            for library, name in names.items():
                rows = results[(samples, point, library)]

                def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
                    return harness.median_of(r[key] for r in rows)

                lines.append(
                    f"| {samples:.0e} ({shards:,}) | {point} | {name} | {med('index_gets'):.0f} "
                    f"| {med('shard_gets'):.0f} ({med('distinct_shards'):.0f}) | {med('other_requests'):.0f} |"
                )
    return lines
