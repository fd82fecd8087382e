"""Issue 36's Delta targets: ``delta_to_mds`` against ``dataframe_to_mds`` on the same table, and an incremental
day at table version 2 against version 1,000.

1. Conversion. One Delta table written by deltalake, partitioned by ``day`` (id int64, day string, label int32,
   score double, text ~60-character string, blob 256 random bytes), converted by ``delta_to_mds`` (delta-rs, no
   Spark) and by ``dataframe_to_mds`` on a fresh ``local[2]`` session (driver memory 6 GB). Spark has no Delta
   reader here (no Delta jars: no Maven repository is reachable), so it reads the Parquet files of the table's
   latest version, ``DeltaTable.file_uris()``, with ``spark.read.option("basePath", table).parquet(*uris)``
   (partition discovery gives ``day``, kept a string). Both write the same declared columns, zstd, 64 MB
   shards. Each run is a fresh process; Spark's read and a warm-up ``count()`` are not timed, the call is. CPU
   seconds: the run's whole process tree (driver, JVM, Python workers). The two outputs are checked to hold the
   same rows (a digest of every row, sorted by id).
2. Incremental day. A table on the tests' loopback S3 (moto) behind a counting proxy, with delta-rs's default
   checkpoint interval (100), grown to N versions on local disk by deltalake (one day's partition per version)
   and uploaded. The shard set (on the same S3) last recorded version N - 1; the day's producer appends
   version N (not measured); the measured day is what a run does: ``source_lineage`` of the newest
   shard-set version, ``latest_delta_version``, ``plan_increment`` from the recorded version,
   ``convert_added_files`` of the appended file (in the recorded schema) into a shard-set ``append``
   transaction with ``delta_lineage``, committed and published. Day 2 (a fresh table of 2 versions each
   repetition) and day N + 1 (one long table, repetitions appending one version each) are interleaved;
   requests are counted by kind at the proxy. A reader that loads the table from its last checkpoint and the
   commits after it (delta-rs checkpoints versions 99, 199...) would pay most where that tail is longest, so
   one more day is measured there: the day that appends version 98 (99 commits, no checkpoint).

    .venv/bin/python benchmarks/bench_delta.py [--rows 1000000] [--days 20] [--versions 1000] [--reps 3]
        [--out benchmarks/results-delta-latest.md]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))  # testsupport: the tests' S3 server and counting proxy

from harness import header, option_parser, ratio_cell, ratio_of_medians, spread, tree_cpu_seconds, write_report

from testsupport.fault_proxy import FaultProxy, apply_env
from testsupport.s3 import MotoServer, delta_options, s3_env

COLUMNS = {"id": "int64", "day": "str", "label": "int32", "score": "float64", "text": "str", "blob": "bytes"}
SIZE_LIMIT = 1 << 26  # 64 MB shards, for both converters
DAY_ROWS = 200  # rows a table version appends in the incremental part
CHECKPOINT_INTERVAL = 100  # delta-rs's default: a checkpoint every hundred commits

# ---- 1. conversion ----------------------------------------------------------------------------------------


def write_table(path: Path, rows: int, days: int, group: int = 65536) -> None:
    """The conversion's Delta table: one version, ``days`` partitions, written a record batch at a time."""
    import deltalake
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(0)
    schema = pa.schema(list(_ARROW.items()))

    def batches() -> Any:
        for start in range(0, rows, group):
            ids = np.arange(start, min(start + group, rows), dtype=np.int64)
            n = len(ids)
            blob = rng.integers(0, 256, (n, 256), dtype=np.uint8)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(ids),
                    pa.array([f"2026-01-{1 + d:02}" for d in (ids % days).tolist()]),
                    pa.array((ids % 1000).astype(np.int32)),
                    pa.array(rng.random(n)),
                    pa.array([f"row {i} of the Delta benchmark table, some words" for i in ids.tolist()]),
                    pa.Array.from_buffers(
                        pa.binary(),
                        n,
                        [None, pa.py_buffer(np.arange(0, 256 * n + 1, 256, dtype=np.int32)), pa.py_buffer(blob)],
                    ),
                ],
                schema=schema,
            )

    deltalake.write_deltalake(path, pa.RecordBatchReader.from_batches(schema, batches()), partition_by=["day"])


_ARROW = {"id": "int64", "day": "string", "label": "int32", "score": "double", "text": "string", "blob": "binary"}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One timed conversion in this (fresh) process: seconds, CPU seconds of the process tree, rows."""
    if spec["run"] == "delta":
        from mds_core.convert.delta import delta_to_mds

        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        done = delta_to_mds(spec["table"], spec["out"], COLUMNS, compression="zstd", size_limit=SIZE_LIMIT)
        rows = done.stats.rows
    else:
        from mds_core.convert.spark import dataframe_to_mds

        frame = _spark_frame(spec)
        frame.count()  # warm-up: file listing, JVM
        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        kwargs = {"out": spec["out"], "columns": COLUMNS, "compression": "zstd", "size_limit": SIZE_LIMIT}
        rows = dataframe_to_mds(frame, merge_index=True, mds_kwargs=kwargs).stats.rows
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": tree_cpu_seconds() - cpu0, "rows": rows}


def _spark_frame(spec: dict[str, Any]) -> Any:
    """The Parquet files of the table's latest version, read by a fresh ``local[2]`` session."""
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")  # day stays a string
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    uris = DeltaTable(spec["table"]).file_uris()
    return spark.read.option("basePath", spec["table"]).parquet(*uris).select(*COLUMNS)


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` measured in a fresh process of this script; its JSON answer."""
    command = [sys.executable, __file__, "--_serve", json.dumps(spec)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{spec['run']} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def row_digest(out: str) -> tuple[int, str]:
    """Rows and one digest of every row of the MDS dataset at ``out``, rows sorted by id."""
    from mds_core import LocalDataset

    digests = []
    for sample in LocalDataset(out):
        parts = [str(int(sample["id"])), sample["day"], str(int(sample["label"])), repr(float(sample["score"]))]
        line = "\0".join([*parts, sample["text"]]).encode() + b"\0" + bytes(sample["blob"])
        digests.append((int(sample["id"]), hashlib.sha1(line).digest()))
    total = hashlib.sha1(b"".join(digest for _, digest in sorted(digests)))
    return len(digests), total.hexdigest()


def conversion(work: Path, rows: int, days: int, reps: int) -> dict[str, Any]:
    """Both converters on one table, interleaved ``reps`` times; the last outputs compared row by row."""
    table = work / "table"
    began = time.perf_counter()
    write_table(table, rows, days)
    written = time.perf_counter() - began
    runs: dict[str, list[dict[str, Any]]] = {"delta": [], "spark": []}
    for rep in range(reps):
        for run in runs:
            out = work / f"out-{run}"
            shutil.rmtree(out, ignore_errors=True)
            runs[run].append(run_child({"run": run, "table": str(table), "out": str(out)}))
            print(f"  {run} rep {rep}: {runs[run][-1]}", file=sys.stderr)
    same = row_digest(str(work / "out-delta")) == row_digest(str(work / "out-spark"))
    return {"runs": runs, "same_rows": same, "table_seconds": written, "files": len(list(table.rglob("*.parquet")))}


def conversion_lines(result: dict[str, Any], rows: int) -> list[str]:
    runs = result["runs"]
    seconds = {run: [r["seconds"] for r in runs[run]] for run in runs}
    lines = ["| converter | seconds | rows/s (median) | CPU seconds | rows written |", "|---|--:|--:|--:|--:|"]
    for run, label in (("delta", "`delta_to_mds` (delta-rs)"), ("spark", "`dataframe_to_mds` (`local[2]`)")):
        rate = rows / sorted(seconds[run])[len(seconds[run]) // 2]
        cpu = [r["cpu_seconds"] for r in runs[run]]
        lines.append(
            f"| {label} | {spread(seconds[run], 2)} | {rate:,.0f} | {spread(cpu, 1)} | {runs[run][0]['rows']:,} |"
        )
    speed = ratio_cell(ratio_of_medians(seconds["spark"], seconds["delta"]), target=1.0)
    return [
        *lines,
        "",
        f"`delta_to_mds` rows/s ÷ `dataframe_to_mds` rows/s: {speed}; both outputs hold the same rows: "
        f"**{'yes' if result['same_rows'] else 'NO'}**.",
        "",
    ]


# ---- 2. incremental day -----------------------------------------------------------------------------------


def day_table(version: int) -> Any:
    """The rows version ``version`` of an incremental table appends: one day's partition."""
    import pyarrow as pa

    ids = range(version * DAY_ROWS, (version + 1) * DAY_ROWS)
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"day {version:05}"] * DAY_ROWS})


def seeded_table(server: MotoServer, versions: int) -> str:
    """An ``s3://`` table of ``versions`` daily appends, written on local disk by deltalake and uploaded."""
    import deltalake
    import s3fs

    with tempfile.TemporaryDirectory(prefix="mds-bench-delta-") as local:
        for version in range(versions):
            deltalake.write_deltalake(local, day_table(version), partition_by=["day"], mode="append")
        uri = f"s3://{server.new_bucket()}/table"
        s3fs.S3FileSystem(client_kwargs={"endpoint_url": server.endpoint}).put(local, uri[5:], recursive=True)
    return uri


def seeded_set(server: MotoServer, uri: str) -> str:
    """A shard set holding the table's latest version, with its lineage (before the measured day)."""
    from mds_core.convert.delta import delta_to_mds
    from mds_core.convert.delta_increment import delta_lineage
    from mds_core.versions import ShardSet

    root = f"s3://{server.new_bucket()}/set"
    with ShardSet(root).transaction("overwrite") as tx:
        tx.lineage.update(delta_lineage(delta_to_mds(uri, tx.out, storage_options=delta_options(server.endpoint))))
    return root


def incremental_day(uri: str, root: str, proxy: FaultProxy, server: MotoServer) -> dict[str, Any]:
    """The producer appends a day (not counted); then one run's day, counted at the proxy."""
    import deltalake

    from mds_core.convert.delta_changes import plan_increment
    from mds_core.convert.delta_increment import convert_added_files, delta_lineage
    from mds_core.convert.delta_log import latest_delta_version
    from mds_core.versions import ShardSet
    from mds_core.versions.source_lineage import source_lineage

    options = delta_options(proxy.endpoint)
    table = deltalake.DeltaTable(uri, storage_options=delta_options(server.endpoint))
    deltalake.write_deltalake(table, day_table(table.version() + 1), partition_by=["day"], mode="append")
    before, began = len(proxy.requests), time.perf_counter()
    shard_set = ShardSet(root)
    latest = shard_set.latest()
    recorded = source_lineage(latest) if latest is not None else None
    assert recorded is not None
    plan = plan_increment(uri, recorded["versions"][1], latest_delta_version(uri, options), storage_options=options)
    assert plan.mode == "append" and len(plan.added_files) == 1, plan
    with shard_set.transaction("append") as tx:
        files, version = plan.added_files, plan.to_version
        added = convert_added_files(uri, files, tx.out, version=version, recorded=recorded, storage_options=options)
        tx.lineage.update(delta_lineage(added, first_version=plan.from_version + 1))
    seconds = time.perf_counter() - began
    kinds = Counter(request_kind(method, target) for method, target in proxy.requests[before:])
    return {"version": plan.to_version, "seconds": seconds, "requests": sum(kinds.values()), "kinds": kinds}


def request_kind(method: str, target: str) -> str:
    """``GET _delta_log/ commit``, ``PUT set/ data``...: which store and which kind of object a request touched."""
    path, _, query = target.partition("?")
    if "list-type" in query:
        return f"{method} list {'_delta_log' if '_delta_log' in query else 'set/' if 'set' in query else 'table'}"
    bucket_and_key = path.strip("/").split("/", 1)
    if len(bucket_and_key) == 1:
        return f"{method} bucket"
    key = bucket_and_key[1]
    if "/_delta_log/" in f"/{key}":
        name = key.rsplit("/", 1)[-1]
        what = "commit" if name.endswith(".json") else "checkpoint" if ".checkpoint." in name else name
        return f"{method} _delta_log/ {what}"
    if key.startswith("table/"):
        return f"{method} table data"
    return f"{method} set/ {key.split('/')[1] if key.count('/') > 1 else key.split('/')[-1]}"


def incremental(work: Path, versions: int, reps: int) -> dict[str, Any]:
    """Day 2 (fresh 2-version tables) and day ``versions + 1`` (one long table), interleaved."""
    server = MotoServer(work, count_requests=False)  # the FaultProxy below counts
    proxy = FaultProxy(server.endpoint)
    apply_env(s3_env(proxy.endpoint))  # the shard set's client goes through the proxy
    try:
        began = time.perf_counter()
        long_uri = seeded_table(server, versions)
        long_root = seeded_set(server, long_uri)
        seeded = time.perf_counter() - began
        # delta-rs checkpoints versions 99, 199...: the day that appends version 98 reads 99 commits, the most
        far_uri = seeded_table(server, CHECKPOINT_INTERVAL - 2)
        far = [incremental_day(far_uri, seeded_set(server, far_uri), proxy, server)]
        early, late = [], []
        for _ in range(reps):
            short_uri = seeded_table(server, 2)
            early.append(incremental_day(short_uri, seeded_set(server, short_uri), proxy, server))
            late.append(incremental_day(long_uri, long_root, proxy, server))
            print(
                f"  day {early[-1]['version']}: {early[-1]}\n  day {late[-1]['version']}: {late[-1]}", file=sys.stderr
            )
    finally:
        proxy.stop()
        server.stop()
    return {"early": early, "late": late, "far": far, "seed_seconds": seeded, "versions": versions}


def day_row(label: str, days: list[dict[str, Any]], versus: list[dict[str, Any]] | None = None) -> str:
    """One row: the table versions the days read, each day's requests (of them, the log's), the seconds."""
    seconds = [d["seconds"] for d in days]
    log = [sum(n for kind, n in d["kinds"].items() if "_delta_log" in kind) for d in days]
    ratio = "" if versus is None else ratio_cell(ratio_of_medians(seconds, [d["seconds"] for d in versus]))
    return (
        f"| {label} | {', '.join(str(d['version']) for d in days)} | {', '.join(str(d['requests']) for d in days)} "
        f"| {', '.join(map(str, log))} | {spread(seconds, 2)} | {ratio} |"
    )


def incremental_lines(result: dict[str, Any]) -> list[str]:
    early, late = result["early"], result["late"]
    lines = [
        "| day | table version appended | requests, each day | of them `_delta_log/` | seconds | time ratio |",
        "|---|---|--:|--:|--:|---|",
        day_row("day 2", early),
        day_row(f"day {result['versions'] + 1:,}", late, early),
        day_row(f"day {CHECKPOINT_INTERVAL - 1} (no checkpoint yet: the longest tail)", result["far"], early),
        "",
        f"Requests by kind (last repetition; the {result['versions']:,}-version table was built in "
        f"{result['seed_seconds']:.0f} s):",
        "",
        f"| request | day 2 | day {result['versions'] + 1:,} | day {CHECKPOINT_INTERVAL - 1} |",
        "|---|--:|--:|--:|",
    ]
    kinds = [days[-1]["kinds"] for days in (early, late, result["far"])]
    for kind in sorted(kinds[0] | kinds[1] | kinds[2]):
        lines.append(f"| `{kind}` | " + " | ".join(str(found.get(kind, 0)) for found in kinds) + " |")
    return [*lines, ""]


# ---- main -------------------------------------------------------------------------------------------------

OPTIONS = (
    ("--rows", 1_000_000, "rows of the conversion's table"),
    ("--days", 20, "partitions (days) of the conversion's table"),
    ("--versions", 1000, "versions of the long incremental table"),
    ("--reps", 3, "repetitions (medians of)"),
    ("--parts", "conversion,incremental", "which parts to run"),
    ("--out", "benchmarks/results-delta-latest.md", "the markdown report"),
)


def main() -> None:
    args = option_parser(__doc__ or "", OPTIONS).parse_args()
    if args._serve:  # a child: one conversion, its figures on stdout
        print("RESULT " + json.dumps(child(json.loads(args._serve))), flush=True)
        return
    began, load = time.perf_counter(), os.getloadavg()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mds-bench-delta-") as work:
        if "conversion" in args.parts:
            lines += [f"## Conversion: {args.rows:,} rows, {args.days} partitions", ""]
            lines += conversion_lines(conversion(Path(work), args.rows, args.days, args.reps), args.rows)
        if "incremental" in args.parts:
            lines += [f"## Incremental day: day 2 against day {args.versions + 1:,}", ""]
            lines += incremental_lines(incremental(Path(work), args.versions, args.reps))
    settings = (
        f"{args.reps} interleaved reps; conversion: columns {COLUMNS}, zstd, 64 MB shards, a fresh process per run; "
        f"incremental: {DAY_ROWS} rows a version, moto + counting proxy on 127.0.0.1; load average at the start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, at the end {os.getloadavg()[0]:.1f}"
    )
    report = header("Delta tables: conversion and the incremental day", time.perf_counter() - began, settings)
    write_report("\n".join([*report, *lines]), args.out)


if __name__ == "__main__":
    main()
