#!/usr/bin/env python3
"""Spark -> MDS, side by side: ``mds_core.convert.spark.dataframe_to_mds`` (pyspark 4.3, ``.venv``) against the
reference's ``streaming.base.converters.dataframe_to_mds`` (mosaicml-streaming 0.13 on pyspark 3.5,
``benchmarks/.venv-spark35``) and against Spark's own Parquet writer, on the same Parquet input.

Tables (each generated once as 8 Parquet files and cached under ``--work``; ``--tables``):

* ``floats`` (~1.1 KB a row): id (long), label (int), score (double), text (string, ~40 characters),
  small (short, non-negative so the reference's uint16 mapping accepts it), emb (array<float> of 256).
  Columns are inferred by both converters (ours writes emb as ``ndarray:float32:256`` after a one-row
  ``first()`` shape guess, the reference as ``ndarray:float32``).
* ``rich`` (~3.3 KB a row): id (long), label (int), text (200-character string), emb (array<float> of
  256), blob (2 KiB of random bytes). Columns are declared for both converters:
  ``id: int64, label: int32, text: str, emb: ndarray:float32:256, blob: bytes``.

Runs, each in its own process with a fresh ``local[2]`` session (driver memory 6 GB), reading the table
with ``spark.read.parquet`` followed by a warm-up ``count()``; only the call itself is timed:

* ``ours``: ``dataframe_to_mds(df, merge_index=True, mds_kwargs={'out': ..., 'compression': 'zstd'})``;
* ``reference``: the same call of the reference's converter (``.venv-spark35``);
* ``native``: ``df.write.mode('overwrite').option('compression', 'zstd').parquet(out)`` (``.venv``);
* ``arrow``: a no-op ``df.mapInArrow`` that drains every record batch and returns one count per task:
  the JVM -> Arrow transfer that every ``mapInArrow`` converter pays (``.venv``);
* ``ours-raw``: ours with ``compression=None``: transfer + encoding + writing, without zstd.

Each repetition (``--reps``, default 3) runs them interleaved: ours, reference, native, arrow,
ours-raw, then again. Beside each wall time is the CPU time of the run's whole process tree during the
call: utime + stime from ``/proc/<pid>/stat`` of the Python driver process, the Spark JVM and Spark's
Python workers (the ``pyspark.daemon`` and the workers it forks; reaped ones through their parent's
cutime), read just before and just after the timed call (``harness.process_tree_cpu``). Summaries
are medians; every ratio is a ratio of medians with the smallest and largest per-repetition ratio
(repetitions paired in the order they ran). Targets (local ``out``): ours' rows/s >= 3x the
reference's, ours' time <= 1.5x the native Parquet write's. The breakdown (a) -> (b) -> ours shows
where ours' time goes: transfer, then encoding and writing, then zstd.

Scenarios (``--scenarios``):

* ``local``: ``out`` is a local directory; all five runs;
* ``s3``: ``out`` is ``s3://...`` on a moto server on 127.0.0.1 (ours and the reference only: the
  native write would need Hadoop's s3a, and the breakdown does not depend on ``out``). The reference
  keeps every shard on local disk until the end when merging; ours uploads each shard as it completes.
  The moto server shares the two cores and is reset after each run; its CPU is reported apart (it is
  not in the run's process tree). No target there: it is a check of bounded executor-side disk.
* ``cluster``: the same call on a Spark standalone cluster started for the benchmark from pyspark's own
  distribution (``testsupport/spark_cluster.py``): a master and two workers on 127.0.0.1, each worker 1 core
  and 3 GB, one executor per worker (2 GB), the driver a separate ``spark://`` application (driver
  memory 2 GB) reading the same cached Parquet (a shared path: one host) and writing a local ``out``
  (shared the same way). Each repetition runs every run twice, interleaved: on ``local[2]`` (as in
  ``local``), then on the cluster, so the two see the same machine load. CPU seconds of a cluster run
  add the workers' process trees (their executor JVMs and Python workers) to the driver's; peak scratch
  is sampled under the workers' directories. The executors run the project's ``.venv`` Python (mds_core
  from the editable install), not a shipped zip. Target: ours on the cluster within 1.25x of ours on
  ``local[2]`` (the same 2 cores).

The orchestrating process samples the disk used by each run's scratch space (its ``TMPDIR``, holding
Spark's local dirs and every temporary directory either converter makes) every 0.2 s: the
executor-side local disk. Every run's output is checked: the merged ``index.json`` (or the Parquet
footers) must hold every row. The markdown report goes to ``--out`` (default
``benchmarks/results-spark-latest.md``), headed by ``harness.header``. Full run (after ``make install`` and ``bash benchmarks/setup_spark_env.sh``;
about an hour on 2 cores; ~15 GB free disk at the peak)::

    .venv/bin/python benchmarks/bench_spark.py --rows 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))  # testsupport: the tests' moto server
import harness  # stdlib + numpy: imports in every benchmark environment

from testsupport.s3 import MotoServer, s3_env  # stdlib only, like harness

PYTHONS = {"ours": ROOT / ".venv" / "bin" / "python", "reference": HERE / ".venv-spark35" / "bin" / "python"}
RUNS = ("ours", "reference", "native", "arrow", "ours-raw")  # the interleaving order within a repetition
ENV_OF = {"ours": "ours", "reference": "reference", "native": "ours", "arrow": "ours", "ours-raw": "ours"}
LABELS = {
    "ours": "ours: `dataframe_to_mds`, zstd",
    "reference": "reference: `dataframe_to_mds`, zstd",
    "native": "Spark's Parquet writer, zstd",
    "arrow": "(a) no-op `mapInArrow` draining every batch: JVM → Arrow",
    "ours-raw": "(b) ours, compression=None: + encoding and writing",
}
TABLES = ("floats", "rich")
COLUMNS: dict[str, dict[str, str] | None] = {
    "floats": None,  # inferred by both
    "rich": {"id": "int64", "label": "int32", "text": "str", "emb": "ndarray:float32:256", "blob": "bytes"},
}
TABLE_TEXT = {
    "floats": "id (long), label (int), score (double), text (~40 chars), small (short), emb (array<float> "
    "of 256); columns inferred",
    "rich": "id (long), label (int), text (200 chars), emb (array<float> of 256), blob (2 KiB binary); "
    "columns declared (`int64`, `int32`, `str`, `ndarray:float32:256`, `bytes`) for both converters",
}
METHOD = (
    "Each run is a fresh process with its own `local[2]` Spark session (driver memory 6 GB) reading the cached "
    "Parquet; after a warm-up `count()` only the call is timed: `dataframe_to_mds(df, merge_index=True, "
    "mds_kwargs={'out', 'compression'[, 'columns']})` (zstd, 64 MB shards), or `df.write.mode('overwrite')"
    ".option('compression', 'zstd').parquet(out)`, or a no-op `mapInArrow` that drains every batch. Repetitions "
    "interleave the runs (ours, reference, native, (a), (b), then again). Seconds and CPU seconds are medians "
    "[min–max]; ratios are ratios of medians [min–max of the per-repetition ratios]. CPU seconds: utime + stime "
    "of the run's whole process tree during the call, read from `/proc/<pid>/stat` just before and just after "
    "it: the Python driver process, the Spark JVM (all its threads) and Spark's Python workers "
    "(`pyspark.daemon` and the workers it forks, reused across tasks; workers that exit are counted through "
    "their parent's cutime); the split in brackets is driver / JVM / Python workers. CPU ÷ wall: how many of "
    "the 2 cores the run kept busy. Peak scratch: the largest disk use under the run's `TMPDIR` (Spark's local "
    "dirs and the converters' temporary directories), sampled every 0.2 s. Rows checked: the merged "
    "`index.json` (the Parquet footers for the native write, the drained count for (a)) holds every input row."
)


# ---- input ------------------------------------------------------------------------------------------


def generate(path: Path, table: str, rows: int, files: int = 8, group: int = 16384) -> None:
    """Parquet files of one benchmark table, written a row group at a time (skipped when cached)."""
    import numpy as np
    import pyarrow.parquet as pq

    marker = path / f"_COMPLETE_{rows}"
    if marker.exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    rng = np.random.default_rng(0)
    corpus = _corpus(rng) if table == "rich" else None
    per_file = -(-rows // files)
    for index, start in enumerate(range(0, rows, per_file)):
        stop = min(start + per_file, rows)
        writer = None
        for at in range(start, stop, group):
            ids = np.arange(at, min(at + group, stop), dtype=np.int64)
            batch = _floats(rng, ids) if table == "floats" else _rich(rng, ids, corpus)
            if writer is None:
                writer = pq.ParquetWriter(path / f"part-{index:03}.parquet", batch.schema)
            writer.write_table(batch, row_group_size=group)
        if writer is not None:
            writer.close()
    marker.touch()


def _floats(rng: Any, ids: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    n = len(ids)
    emb = rng.standard_normal((n, 256), dtype=np.float32)
    return pa.table(
        {
            "id": ids,
            "label": (ids % 1000).astype(np.int32),
            "score": rng.random(n),
            "text": pa.array([f"document number {i} of the benchmark set" for i in ids.tolist()]),
            "small": (ids % 30000).astype(np.int16),
            "emb": pa.ListArray.from_arrays(np.arange(0, 256 * n + 1, 256, dtype=np.int32), emb.ravel()),
        }
    )


def _corpus(rng: Any, words: int = 200_000) -> Any:
    """Text-like ASCII bytes: random lowercase words of 2-10 letters separated by spaces."""
    import numpy as np

    vocabulary = ["".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(2, 11))) for _ in range(5000)]
    return np.frombuffer(" ".join(rng.choice(vocabulary, words)).encode(), np.uint8)


def _rich(rng: Any, ids: Any, corpus: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    n = len(ids)
    starts = rng.integers(0, corpus.size - 200, n)
    text = corpus[starts[:, None] + np.arange(200)]  # (n, 200) bytes: 200-character strings
    blob = rng.integers(0, 256, (n, 2048), dtype=np.uint8)
    emb = rng.standard_normal((n, 256), dtype=np.float32)

    def var(kind: Any, data: Any, width: int) -> Any:
        offsets = np.arange(0, width * n + 1, width, dtype=np.int32)
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data.ravel())])

    return pa.table(
        {
            "id": ids,
            "label": (ids % 1000).astype(np.int32),
            "text": var(pa.string(), text, 200),
            "emb": pa.ListArray.from_arrays(np.arange(0, 256 * n + 1, 256, dtype=np.int32), emb.ravel()),
            "blob": var(pa.binary(), blob, 2048),
        }
    )


# ---- one run, in a child process of its environment ------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    spark = local_session(spec, f"bench-{spec['run']}", spec.get("master", "local[2]"))
    frame, rows, seconds, written, (cpu0, cpu1) = timed_call(spark, spec)
    report = {
        "run": spec["run"],
        "rows": rows,
        "seconds": seconds,
        "partitions": frame.rdd.getNumPartitions(),
        **_cpu_split(cpu0, cpu1, os.getpid()),
    }
    print_result(spark, report, written)


def local_session(spec: dict[str, Any], app: str, master: str) -> Any:
    """A classic session (driver memory 6 GB, Spark's local dirs in the run's scratch), ``spec['conf']`` on top."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.local.dir", os.path.join(spec["scratch"], "spark-local"))
    )
    for key, value in spec.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed_call(spark: Any, spec: dict[str, Any]) -> tuple[Any, int, float, int | None, tuple[dict, dict]]:
    """Read the input, warm up, then time ``spec['run']``'s call: the frame, its rows, the seconds, the rows
    the call wrote (when it says) and the process trees' CPU readings before and after it."""
    frame = spark.read.parquet(spec["source"])
    rows = frame.count()  # warm-up: file listing, JVM
    os.sync()  # the previous run's output must not be written back during this one
    action = _action(spec["run"], frame, spec)
    cpu0 = _tree_cpu(spec)
    started = time.perf_counter()
    written = action()
    seconds = time.perf_counter() - started
    return frame, rows, seconds, written, (cpu0, _tree_cpu(spec))


def print_result(spark: Any, report: dict[str, Any], written: int | None) -> None:
    """Stop the session and print the run's report, the line the parent reads (``run_child``)."""
    if written is not None:
        report["written_rows"] = written
    spark.stop()
    print("RESULT " + json.dumps(report), flush=True)


def run_child(script: str, spec: dict[str, Any], env: dict[str, str], what: str) -> dict[str, Any]:
    """``script --child SPEC`` in ``spec``'s environment's Python: the report it printed, or RuntimeError."""
    python = PYTHONS[ENV_OF[spec["run"]]]
    command = [str(python), script, "--child", json.dumps(spec)]
    proc = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=7200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1][7:])
    return result


def _tree_cpu(spec: dict[str, Any]) -> dict[int, tuple[str, float]]:
    """This process's tree, and on a cluster the workers' trees too (their executors and Python workers)."""
    found = harness.process_tree_cpu()
    for pid in spec.get("worker_pids", []):
        found.update(harness.process_tree_cpu(pid))
    return found


def _action(run: str, frame: Any, spec: dict[str, Any]) -> Any:
    """The timed call, as a function returning the rows it wrote when it knows them (else None)."""
    if run == "native":
        return lambda: frame.write.mode("overwrite").option("compression", "zstd").parquet(spec["out"])
    if run == "arrow":
        return lambda: sum(row["rows"] for row in frame.mapInArrow(_drain, "rows long").collect())
    if run == "reference":
        from streaming.base.converters import dataframe_to_mds
    else:
        from mds_core.convert.spark import dataframe_to_mds
    kwargs: dict[str, Any] = {"out": spec["out"], "compression": None if run == "ours-raw" else "zstd"}
    if spec["columns"] is not None:
        kwargs["columns"] = dict(spec["columns"])
    return lambda: _rows_of(dataframe_to_mds(frame, merge_index=True, mds_kwargs=kwargs))


def _drain(batches: Any) -> Any:
    """A no-op ``mapInArrow`` function: takes every record batch, returns one row count."""
    import pyarrow as pa

    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_arrays([pa.array([rows], pa.int64())], names=["rows"])


def _rows_of(result: Any) -> int | None:
    stats = getattr(result, "stats", None)  # ours: ConversionStats; the reference returns paths only
    return getattr(stats, "rows", None)


def _cpu_split(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], driver: int
) -> dict[str, float]:
    """CPU seconds between two readings: all, and split into the driver, the JVM and the Python workers."""

    def part(reading: dict[int, tuple[str, float]], group: str) -> float:
        return sum(s for pid, (comm, s) in reading.items() if _group(pid, comm, driver) == group)

    split = {g: part(after, g) - part(before, g) for g in ("driver", "jvm", "workers")}
    return {"cpu_seconds": sum(split.values()), **{f"cpu_{g}": v for g, v in split.items()}}


def _group(pid: int, comm: str, driver: int) -> str:
    return "driver" if pid == driver else "jvm" if comm == "java" else "workers"


# ---- orchestration --------------------------------------------------------------------------------------


class DiskSampler:
    """Peak bytes allocated under ``root``, sampled in a thread of the orchestrating process."""

    def __init__(self, root: Path, interval: float = 0.2) -> None:
        self.root, self.interval, self.peak = root, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
            with contextlib.suppress(OSError):  # removed while we looked
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


class Moto(MotoServer):
    """The tests' moto server, talked to directly (no counting proxy), with what a run's checks need."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, count_requests=False)

    def client(self) -> Any:
        import boto3

        keys = {name.lower(): s3_env(self.endpoint)[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", **keys)

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def stored_bytes(self, bucket: str) -> int:
        total = 0
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket):
            total += sum(obj["Size"] for obj in page.get("Contents", []))
        return total

    def index(self, bucket: str, key: str) -> dict[str, Any]:
        return json.loads(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def reset(self) -> None:
        """Drop every bucket: moto keeps objects in memory."""
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")).read()


def measure(
    run: str, scenario: str, table: str, work: Path, source: Path, moto: Moto | None, cluster: Any = None
) -> dict[str, Any]:
    base = work / f"{scenario}-{table}-{run}"
    shutil.rmtree(base, ignore_errors=True)
    scratch = base / "scratch"
    scratch.mkdir(parents=True)
    python = PYTHONS[ENV_OF[run]]
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "PYTHONWARNINGS": "ignore",
    }
    bucket = ""  # set when the output goes to the S3 server
    if moto is not None:
        env.update(s3_env(moto.endpoint))
        bucket = moto.bucket(f"{scenario}-{table}-{run}")
        out = f"s3://{bucket}/data"
    else:
        out = str(base / "out")
    spec: dict[str, Any] = {
        "run": run,
        "source": str(source),
        "out": out,
        "scratch": str(scratch),
        "columns": COLUMNS[table],
    }
    sampled = scratch
    if cluster is not None:
        spec.update(
            master=cluster.master_url,
            worker_pids=[p.pid for p in cluster.processes[1:]],
            conf={
                "spark.driver.memory": "2g",
                "spark.executor.memory": "2g",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            },
        )
        sampled = cluster.root
    moto_cpu0 = harness.tree_cpu_seconds(moto.process.pid) if moto is not None else 0.0
    baseline = disk_usage(sampled) if cluster is not None else 0  # the workers' earlier logs
    try:
        with DiskSampler(sampled) as sampler:
            report = run_child(__file__, spec, env, f"{run}/{scenario}/{table}")
        report["peak_scratch_bytes"] = sampler.peak - baseline
        if moto is not None:  # the server's CPU over the whole child process (it idles outside the call)
            report["cpu_moto"] = harness.tree_cpu_seconds(moto.process.pid) - moto_cpu0
            report["output_bytes"] = moto.stored_bytes(bucket)
            report["verified_rows"] = _index_rows(moto.index(bucket, "data/index.json"))
        else:
            report["output_bytes"] = disk_usage(Path(out)) if run != "arrow" else 0
            report["verified_rows"] = _local_rows(run, Path(out), report)
        report["verified"] = report["verified_rows"] == report["rows"]
        return report
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if moto is not None:
            moto.reset()


def _index_rows(index: dict[str, Any]) -> int:
    return sum(shard["samples"] for shard in index["shards"])


def _local_rows(run: str, out: Path, report: dict[str, Any]) -> int:
    if run == "arrow":
        return report["written_rows"]
    if run == "native":
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(part).num_rows for part in out.glob("*.parquet"))
    return _index_rows(json.loads((out / "index.json").read_text()))


# ---- report ----------------------------------------------------------------------------------------------


def _mb(n: float | None) -> str:
    return "—" if n is None else f"{n / 1e6:,.0f} MB"


def _cpu(results: list[dict[str, Any]]) -> str:
    """Median CPU seconds [min–max], then the median split: driver / JVM / Python workers."""
    cell = harness.spread([r["cpu_seconds"] for r in results])
    parts = [harness.median(r[f"cpu_{g}"] for r in results) for g in ("driver", "jvm", "workers")]
    return f"{cell} ({' / '.join(harness.fmt(p, 1) for p in parts)})"


def _run_cells(results: list[dict[str, Any]], rows: int) -> str:
    """A run's rows/s, seconds, CPU seconds, CPU ÷ wall and peak scratch: the cells every table starts with."""
    secs = [r["seconds"] for r in results]
    med, cpu = harness.median_of(secs), harness.median_of(r["cpu_seconds"] for r in results)
    peak = _mb(harness.median(r["peak_scratch_bytes"] for r in results))
    return f"{harness.fmt(rows / med)} | {harness.spread(secs)} | {_cpu(results)} | {cpu / med:.2f} | {peak}"


def _checked(results: list[dict[str, Any]]) -> str:
    return "yes" if all(r["verified"] for r in results) else "**NO**"


def section(
    table: str, scenario: str, rows: int, got: dict[str, list[dict[str, Any]]], errors: dict[str, str]
) -> list[str]:
    secs = {run: [r["seconds"] for r in results] for run, results in got.items()}
    title = "local `out`" if scenario == "local" else "`s3://` `out` (moto on 127.0.0.1)"
    lines = [
        f"## `{table}` table, {title}",
        "",
        f"{rows:,} rows: {TABLE_TEXT[table]}.",
        "",
        "| run | rows/s | seconds, median [min–max] | CPU seconds, median [min–max] (driver / JVM / "
        "workers) | CPU ÷ wall | peak scratch | output | rows checked |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for run in ("ours", "reference", "native"):
        if run in errors:
            lines.append(f"| {LABELS[run]} | failed: {errors[run]} | | | | | | |")
        if run not in got:
            continue
        output = _mb(harness.median(r["output_bytes"] for r in got[run]))
        lines.append(f"| {LABELS[run]} | {_run_cells(got[run], rows)} | {output} | {_checked(got[run])} |")
    lines += ["", "| ratio (of medians [min–max of the repetitions]) | value |", "|---|---|"]
    if "ours" in got and "reference" in got:
        target = 3 if scenario == "local" else None  # with s3 a check of bounded disk, not a target
        lines.append(f"| ours' rows/s ÷ the reference's | {harness.speedup(secs['ours'], secs['reference'], target)} |")
    if "ours" in got and "native" in got:
        ratio = harness.ratio_of_medians(secs["ours"], secs["native"])
        lines.append(f"| ours' time ÷ Spark's Parquet write | {harness.ratio_cell(ratio, 1.5, at_most=True)} |")
        cpu_ratio = harness.ratio_of_medians(*[[r["cpu_seconds"] for r in got[k]] for k in ("ours", "native")])
        lines.append(f"| ours' CPU seconds ÷ Spark's Parquet write's | {harness.ratio_cell(cpu_ratio)} |")
    if "ours" in got and "reference" in got:
        cpu_ratio = harness.ratio_of_medians(*[[r["cpu_seconds"] for r in got[k]] for k in ("reference", "ours")])
        lines.append(f"| the reference's CPU seconds ÷ ours | {harness.ratio_cell(cpu_ratio)} |")
    stages = [run for run in ("arrow", "ours-raw", "ours") if run in got]
    if scenario == "local" and len(stages) > 1:
        lines += [
            "",
            "Where ours' time goes (each stage adds to the one above; the same timing and CPU count):",
            "",
            "| stage | seconds, median [min–max] | CPU seconds, median [min–max] (driver / JVM / workers) "
            "| added: seconds / CPU seconds (medians) | share of (c) |",
            "|---|--:|--:|--:|--:|",
        ]
        previous = None
        for run in stages:
            med = harness.median_of(secs[run])
            cpu = harness.median_of(r["cpu_seconds"] for r in got[run])
            added = "" if previous is None else f"{med - previous[0]:+.1f} / {cpu - previous[1]:+.1f}"
            share = med / harness.median_of(secs["ours"]) if "ours" in got else None
            label = (
                LABELS[run]
                if run != "ours"
                else "(c) ours, zstd (as shipped)" + (": + zstd" if "ours-raw" in got else "")
            )
            lines.append(
                f"| {label} | {harness.spread(secs[run])} | {_cpu(got[run])} | {added} | "
                f"{'—' if share is None else f'{share:.0%}'} |"
            )
            previous = (med, cpu)
    if scenario == "s3":
        moto = [
            f"{LABELS[run].split(':')[0]} {harness.median(r['cpu_moto'] for r in got[run]):.1f} s"
            for run in ("ours", "reference")
            if run in got
        ]
        lines += [
            "",
            "The moto server (same machine, outside the counted process tree) used CPU seconds, "
            f"median over each whole run: {', '.join(moto)}.",
        ]
    for run in ("arrow", "ours-raw"):
        if run in errors:
            lines.append(f"\n{LABELS[run]} failed: {errors[run]}")
    return lines + [""]


CLUSTER_RUNS = ("ours", "arrow", "ours-raw")


def run_cluster(args: Any, tables: list[str], runs: list[str], sources: dict[str, Path], got: Results) -> None:
    """Each run on local[2] (key "cluster-local"), then on the 2-worker standalone cluster (key "cluster")."""
    from testsupport.spark_cluster import StandaloneCluster

    root = args.work / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    cluster = StandaloneCluster(root, workers=2, cores=1, memory="3g")
    print(f"cluster {cluster.master_url} up in {time.perf_counter() - started:.1f} s", flush=True)
    try:
        for table in tables:
            for rep in range(args.reps):
                for run in [r for r in runs if r in CLUSTER_RUNS]:
                    for scenario in ("cluster-local", "cluster"):
                        on = cluster if scenario == "cluster" else None
                        got.take((scenario, table, run), rep, args.work, sources[table], None, on)
    finally:
        cluster.stop()


class Results:
    """Every run's reports by (scenario, table, run), the last line of each failure, and each table's partitions."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self.errors: dict[tuple[str, str, str], str] = {}
        self.partitions: dict[str, int] = {}

    def take(self, key: tuple[str, str, str], rep: int, *where: Any) -> None:
        """One measurement (``measure(run, scenario, table, *where)``): its report, or its failure's last line."""
        scenario, table, run = key
        if key in self.errors:
            return  # failed before: don't retry every rep
        try:
            report = measure(run, scenario, table, *where)
        except Exception as err:
            self.errors[key] = str(err).strip().splitlines()[-1][:300]
            print(f"FAILED {key}: {err}", file=sys.stderr, flush=True)
            return
        self.results.setdefault(key, []).append(report)
        self.partitions[table] = report["partitions"]
        print(
            f"{scenario} {table} rep {rep + 1} {run}: {report['seconds']:.2f} s, "
            f"cpu {report['cpu_seconds']:.2f} s, verified {report['verified']}",
            flush=True,
        )


def cluster_section(table: str, rows: int, results: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    lines = [
        f"## `{table}` table, local `out`: `local[2]` and a 2-worker standalone cluster",
        "",
        f"{rows:,} rows: {TABLE_TEXT[table]}.",
        "",
        "Each repetition runs each run on `local[2]` (driver memory 6 GB, as above), then on a Spark standalone "
        "cluster started for the benchmark from pyspark's distribution: a master and 2 workers on 127.0.0.1, "
        "each 1 core and 3 GB, one executor per worker (2 GB), the driver a separate application (2 GB). The same "
        "cached Parquet and a local `out` (one host, so a shared path; the converter's shared-path probe, one "
        "small job, is inside the timed call). A cluster run's CPU adds the workers' process trees (executor "
        "JVMs and their Python workers) to the driver's; its peak scratch is sampled under the workers' dirs.",
        "",
        "| run | where | rows/s | seconds, median [min–max] | CPU seconds, median [min–max] (driver / JVMs / "
        "Python workers) | CPU ÷ wall | peak scratch | rows checked |",
        "|---|---|--:|--:|--:|--:|--:|---|",
    ]
    for run in CLUSTER_RUNS:
        for scenario, where in (("cluster-local", "`local[2]`"), ("cluster", "cluster, 2 workers x 1 core")):
            got = results.get((scenario, table, run))
            if not got:
                continue
            lines.append(f"| {LABELS[run]} | {where} | {_run_cells(got, rows)} | {_checked(got)} |")
    lines += ["", "| ratio (of medians [min–max of the repetitions]) | value |", "|---|---|"]
    for run in CLUSTER_RUNS:
        local, remote = results.get(("cluster-local", table, run)), results.get(("cluster", table, run))
        if local and remote:
            ratio = harness.ratio_of_medians([r["seconds"] for r in remote], [r["seconds"] for r in local])
            target = 1.25 if run == "ours" else None
            cell = harness.ratio_cell(ratio, target, at_most=True) if target else harness.ratio_cell(ratio)
            lines.append(f"| {LABELS[run].split(':')[0]}: cluster time ÷ `local[2]` time | {cell} |")
            cpu_ratio = harness.ratio_of_medians([r["cpu_seconds"] for r in remote], [r["cpu_seconds"] for r in local])
            lines.append(
                f"| {LABELS[run].split(':')[0]}: cluster CPU seconds ÷ `local[2]`'s | {harness.ratio_cell(cpu_ratio)} |"
            )
    return lines + [""]


def env_versions(python: Path) -> str:
    code = (
        "import importlib.metadata as m\nout = []\n"
        "for d in ('pyspark', 'mds-pipelines', 'mosaicml-streaming', 'pyarrow', 'pandas', 'numpy'):\n"
        "    try: out.append(f'{d} {m.version(d)}')\n"
        "    except m.PackageNotFoundError: pass\n"
        "import platform; print(f'python {platform.python_version()}, ' + ', '.join(out))"
    )
    # cwd: not the repository, whose mds_pipelines.egg-info would be found on ``-c``'s sys.path
    proc = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True, cwd="/")
    return proc.stdout.strip() or f"unknown ({proc.stderr.strip()[-200:]})"


def java_version() -> str:
    proc = subprocess.run(["java", "-version"], check=False, capture_output=True, text=True)
    return (proc.stderr.splitlines() or ["java not found"])[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in each table")
    parser.add_argument("--tables", default=",".join(TABLES), help="comma list of: floats, rich")
    parser.add_argument("--scenarios", default="local,s3", help="comma list of: local, s3, cluster")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma list of: {', '.join(RUNS)}")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each run (interleaved)")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "mds-bench-spark")
    parser.add_argument("--out", default=str(HERE / "results-spark-latest.md"), help="the markdown report")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    tables, scenarios = args.tables.split(","), args.scenarios.split(",")
    runs = [run for run in RUNS if run in args.runs.split(",")]
    unknown = (
        (set(tables) - set(TABLES))
        | (set(scenarios) - {"local", "s3", "cluster"})
        | (set(args.runs.split(",")) - set(RUNS))
    )
    if unknown:
        sys.exit(f"unknown table, scenario or run: {sorted(unknown)}")
    for env in sorted({ENV_OF[run] for run in runs}):
        if not PYTHONS[env].exists():
            sys.exit(f"{PYTHONS[env]} is missing: run `make install` and `bash benchmarks/setup_spark_env.sh`")
    started = time.perf_counter()
    sources, inputs = {}, []
    for table in tables:
        sources[table] = args.work / f"input-{table}-{args.rows}"
        generate(sources[table], table, args.rows)
        inputs.append(f"`{table}` {disk_usage(sources[table]) / 1e6:,.0f} MB")
        print(
            f"input {table}: {args.rows:,} rows, {disk_usage(sources[table]) / 1e6:,.0f} MB of Parquet "
            f"in {sources[table]}",
            flush=True,
        )
    got = Results()
    results, errors, partitions = got.results, got.errors, got.partitions
    for scenario in scenarios:
        if scenario == "cluster":
            run_cluster(args, tables, runs, sources, got)
            continue
        moto = Moto(args.work) if scenario == "s3" else None
        scenario_runs = [run for run in runs if scenario == "local" or run in ("ours", "reference")]
        try:
            for table in tables:
                for rep in range(args.reps):
                    for run in scenario_runs:
                        got.take((scenario, table, run), rep, args.work, sources[table], moto)
        finally:
            if moto:
                moto.stop()
    wall = time.perf_counter() - started
    settings = (
        f"--rows {args.rows:,}, --reps {args.reps}, tables {','.join(tables)}, scenarios "
        f"{','.join(scenarios)}, runs {','.join(runs)}; input Parquet (8 files, cached): {', '.join(inputs)}; "
        f"partitions: {', '.join(f'{t} {n}' for t, n in partitions.items())}"
    )
    reference = env_versions(PYTHONS["reference"]) if PYTHONS["reference"].exists() else "not installed"
    lines = harness.header("Spark → MDS: ours, the reference and Spark's Parquet writer", wall, settings)
    # The header's library line is this process's environment; each side's own versions instead:
    at = next(i for i, line in enumerate(lines) if line.startswith("- mosaicml-streaming "))
    lines[at : at + 1] = [
        f"- ours, native and breakdown runs (`.venv`): {env_versions(PYTHONS['ours'])}",
        f"- reference (`benchmarks/.venv-spark35`): {reference}",
        f"- {java_version()}",
    ]
    lines += [METHOD, ""]
    for table in tables:
        for scenario in scenarios:
            ran = {run: results[(scenario, table, run)] for run in runs if (scenario, table, run) in results}
            errs = {run: errors[(scenario, table, run)] for run in runs if (scenario, table, run) in errors}
            if scenario == "cluster" and ran:
                lines += cluster_section(table, args.rows, results)
            elif ran or errs:
                lines += section(table, scenario, args.rows, ran, errs)
    harness.write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
