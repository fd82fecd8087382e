#!/usr/bin/env python3
"""Spark -> MDS, side by side: ``mds_core.convert.spark.dataframe_to_mds`` (pyspark 4.3, ``.venv``) against the
reference's ``streaming.base.converters.dataframe_to_mds`` (mosaicml-streaming 0.13 on pyspark 3.5,
``benchmarks/.venv-spark35``), on the same Parquet input, each in its own ``local[2]`` session.

The input (generated once, cached): ``--rows`` rows of id (long), label (int), score (double), text
(string, ~40 characters), small (short, non-negative so the reference's uint16 mapping accepts it)
and emb (array<float> of 256). Both sides read it with ``spark.read.parquet``; the time is the
``dataframe_to_mds`` call alone (after a warm-up count), with the defaults (zstd, 64 MB shards,
merge_index=True, columns inferred: ours detects the fixed 256 shape with its extra pass).

Scenarios:
* ``local``: ``out`` is a local directory;
* ``s3``: ``out`` is ``s3://...`` on a moto server on 127.0.0.1 (the reference keeps every shard on
  local disk until the end when merging; ours uploads each shard as it completes).

A thread in each run samples the disk used by the run's scratch space (its ``TMPDIR``, which holds
Spark's local dirs and every temporary directory either converter makes) every 0.2 s: that is the
executor-side local disk. Run (after ``bash benchmarks/setup_spark_env.sh``)::

    .venv/bin/python benchmarks/bench_spark.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHONS = {"ours": ROOT / ".venv" / "bin" / "python", "reference": HERE / ".venv-spark35" / "bin" / "python"}


# ---- input ------------------------------------------------------------------------------------------

def generate(path: Path, rows: int, files: int = 8) -> None:
    """Parquet files of the benchmark table (skipped when a complete copy is there)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = path / f"_COMPLETE_{rows}"
    if marker.exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per_file = -(-rows // files)
    for index, start in enumerate(range(0, rows, per_file)):
        n = min(per_file, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        emb = rng.standard_normal((n, 256), dtype=np.float32)
        table = pa.table({
            "id": ids,
            "label": (ids % 1000).astype(np.int32),
            "score": rng.random(n),
            "text": pa.array([f"document number {i} of the benchmark set" for i in ids.tolist()]),
            "small": (ids % 30000).astype(np.int16),
            "emb": pa.ListArray.from_arrays(np.arange(0, 256 * n + 1, 256, dtype=np.int32), emb.ravel()),
        })
        pq.write_table(table, path / f"part-{index:03}.parquet", row_group_size=16384)
    marker.touch()


# ---- one conversion, in a child process of the implementation's own environment ----------------------

class DiskSampler:
    """Peak bytes allocated under ``root``, sampled in a thread."""

    def __init__(self, root: Path, interval: float = 0.2) -> None:
        self.root, self.interval, self.peak = root, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "DiskSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, disk_usage(self.root))
            self._stop.wait(self.interval)


def disk_usage(root: Path) -> int:
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                pass  # removed while we looked
    return total


def child(impl: str, source: str, out: str, scratch: str, compression: str = "zstd") -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(f"bench-{impl}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "6g").config("spark.local.dir", os.path.join(scratch, "spark-local"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.parquet(source)
    rows = frame.count()  # warm-up: file listing, JVM
    if impl == "ours":
        from mds_core.convert.spark import dataframe_to_mds
    else:
        from streaming.base.converters import dataframe_to_mds
    with DiskSampler(Path(scratch)) as sampler:
        started = time.perf_counter()
        kwargs = {"out": out, "compression": None if compression == "none" else compression}
        result = dataframe_to_mds(frame, merge_index=True, mds_kwargs=kwargs)
        seconds = time.perf_counter() - started
    report = {"impl": impl, "rows": rows, "seconds": seconds, "partitions": frame.rdd.getNumPartitions(),
              "peak_scratch_bytes": sampler.peak}
    stats = getattr(result, "stats", None)
    if stats is not None:
        report["stats"] = stats.as_dict()
    spark.stop()
    print("RESULT " + json.dumps(report), flush=True)


# ---- orchestration --------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Moto:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self.process = subprocess.Popen([str(PYTHONS["ours"]), "-m", "moto.server", "-H", "127.0.0.1",
                                         "-p", str(self.port)], stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto server did not start")

    def env(self) -> dict[str, str]:
        return {"S3_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}

    def bucket(self, name: str) -> str:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                     aws_access_key_id="bench", aws_secret_access_key="bench").create_bucket(Bucket=name)
        return name

    def stored_bytes(self, bucket: str) -> int:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                              aws_access_key_id="bench", aws_secret_access_key="bench")
        total = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            total += sum(obj["Size"] for obj in page.get("Contents", []))
        return total

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self._log.close()


def run(impl: str, scenario: str, work: Path, source: Path, moto: Moto | None, compression: str) -> dict[str, Any]:
    base = work / f"{scenario}-{impl}"
    shutil.rmtree(base, ignore_errors=True)
    scratch = base / "scratch"
    scratch.mkdir(parents=True)
    python = PYTHONS[impl]
    env = {**os.environ, "TMPDIR": str(scratch), "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    if moto is not None:
        env.update(moto.env())
        out = f"s3://{moto.bucket(f'{scenario}-{impl}')}/data"
    else:
        out = str(base / "out")
    proc = subprocess.run([str(python), __file__, "--child", impl, str(source), out, str(scratch), compression],
                          env=env, capture_output=True, text=True, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{impl}/{scenario} failed:\n{proc.stderr[-4000:]}")
    report = json.loads(lines[-1][7:])
    report["output_bytes"] = moto.stored_bytes(out.split("/")[2]) if moto else disk_usage(Path(out))
    shutil.rmtree(base, ignore_errors=True)
    return report


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = ["| scenario | ours rows/s | reference rows/s | ratio | ours peak scratch | reference peak scratch | output (ours / ref) |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    for scenario, pair in results.items():
        ours, ref = pair["ours"], pair["reference"]
        rate = {k: v["rows"] / v["seconds"] for k, v in pair.items()}
        lines.append(
            f"| {scenario} | {rate['ours']:,.0f} ({ours['seconds']:.1f} s) | {rate['reference']:,.0f} "
            f"({ref['seconds']:.1f} s) | **{rate['ours'] / rate['reference']:.2f}×** | {_mb(ours['peak_scratch_bytes'])} | "
            f"{_mb(ref['peak_scratch_bytes'])} | {_mb(ours['output_bytes'])} / {_mb(ref['output_bytes'])} |")
    return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "mds-bench-spark")
    parser.add_argument("--scenarios", default="local,s3")
    parser.add_argument("--impls", default="ours,reference")
    parser.add_argument("--compression", default="zstd", help="'zstd' (both converters' default) or 'none'")
    parser.add_argument("--child", nargs=5, metavar=("IMPL", "SOURCE", "OUT", "SCRATCH", "COMPRESSION"))
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    for impl in args.impls.split(","):
        python = PYTHONS[impl]
        if not python.exists():
            sys.exit(f"{python} is missing: run `make install` and `bash benchmarks/setup_spark_env.sh`")
    source = args.work / f"input-{args.rows}"
    started = time.perf_counter()
    generate(source, args.rows)
    print(f"input: {args.rows:,} rows, {disk_usage(source) / 1e6:,.0f} MB of Parquet in {source}", flush=True)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in args.scenarios.split(","):
        moto = Moto(args.work / "moto.log") if scenario == "s3" else None
        try:
            for impl in args.impls.split(","):
                report = run(impl, scenario, args.work, source, moto, args.compression)
                results.setdefault(scenario, {})[impl] = report
                print(json.dumps(report), flush=True)
        finally:
            if moto:
                moto.stop()
    if all(len(pair) == 2 for pair in results.values()):
        print(table(results))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
