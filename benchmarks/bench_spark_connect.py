#!/usr/bin/env python3
"""``dataframe_to_mds`` over Spark Connect against the same call on a classic ``local[2]`` session.

The same cached Parquet input as ``bench_spark.py`` (``--table``, default ``floats``: ~1.1 KB a row,
columns inferred). Each repetition runs, interleaved so both see the same machine load:

* ``classic``: as ``bench_spark.py``'s ``ours`` run: a fresh process with a ``local[2]`` session (driver
  memory 6 GB), ``spark.read.parquet`` and a warm-up ``count()``, then only the call is timed;
* ``connect``: a fresh Spark Connect server (``testsupport/spark_connect.py``: pyspark 4.3's own server,
  ``spark-submit --class ...SparkConnectServer``, ``local[2]``, driver memory 6 GB) on 127.0.0.1, and
  a fresh client process that connects to it, reads the same Parquet, runs the warm-up ``count()``, then
  times the same call. The server is started anew for every run (not timed), as the classic JVM is.

``--runs`` adds ``arrow``: the no-op ``mapInArrow`` that drains every record batch (the JVM -> Arrow
transfer every ``mapInArrow`` converter pays) on each side, to show what the Connect path adds on
top of the conversion itself. Inside the timed call the converter's steps are timed too (the checks
before writing, the shape guess, the job, the commit). CPU seconds are those of the classic run's process tree, or of the
Connect client's and the server's trees (the server JVM and its Python workers) together.

Target: the Connect run's time within 1.25x of the classic run's. Report to ``--out`` (default
``benchmarks/results-spark-connect-latest.md``)::

    .venv/bin/python benchmarks/bench_spark_connect.py --rows 300000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_spark
import harness

PYTHON = bench_spark.PYTHONS["ours"]
RUNS = {"ours": "ours", "arrow": "arrow"}  # run name -> bench_spark's run of the same call


PHASES = {  # module, function: what dataframe_to_mds spends its time on, timed in the child
    "checks before writing (cluster.prepare)": ("mds_core.convert.cluster", "prepare"),
    "shape guess (one first())": ("mds_core.convert.spark", "detect_shapes"),
    "the conversion job (mapInArrow + collect)": ("mds_core.convert.spark", "_run_tasks"),
    "commit (driver)": ("mds_core.convert.staging", "Target.commit"),
}


def _time_phases() -> dict[str, float]:
    """Wrap the converter's steps with timers (the child's own process only)."""
    import importlib

    spent: dict[str, float] = {}
    for label, (module_name, name) in PHASES.items():
        module = importlib.import_module(module_name)
        owner, attr = (getattr(module, name.split(".")[0]), name.split(".")[1]) if "." in name else (module, name)
        original = getattr(owner, attr, None)
        if original is None:
            continue

        def timed(*args: Any, _original: Any = original, _label: str = label, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.perf_counter() - started

        setattr(owner, attr, timed)
    return spent


def child(spec: dict[str, Any]) -> None:
    """One run (classic or Connect) in its own process: start, read, warm up, time the call."""
    if spec["mode"] == "connect":
        from mds_core.convert.spark_connect import connect_session

        spark = connect_session(spec["url"])
    else:
        spark = bench_spark.local_session(spec, "bench-classic", "local[2]")
    spent = _time_phases()
    _, rows, seconds, written, (cpu0, cpu1) = bench_spark.timed_call(spark, spec)
    report = {
        "run": spec["run"],
        "rows": rows,
        "seconds": seconds,
        "phases": spent,
        "cpu_seconds": sum(s for _, s in cpu1.values()) - sum(s for _, s in cpu0.values()),
    }
    bench_spark.print_result(spark, report, written)


def measure(mode: str, run: str, work: Path, source: Path, columns: Any) -> dict[str, Any]:
    from testsupport.fault_proxy import apply_env, restore_env
    from testsupport.spark_connect import ConnectServer

    base = work / f"{mode}-{run}"
    shutil.rmtree(base, ignore_errors=True)
    (base / "scratch").mkdir(parents=True)
    out = base / "out"
    spec: dict[str, Any] = {
        "mode": mode,
        "run": run,
        "source": str(source),
        "out": str(out),
        "columns": columns,
        "scratch": str(base / "scratch"),
    }
    env = {
        **os.environ,
        "TMPDIR": str(base / "scratch"),
        "PYSPARK_PYTHON": str(PYTHON),
        "PYSPARK_DRIVER_PYTHON": str(PYTHON),
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": str(HERE),
    }  # Python workers unpickle bench_spark._drain
    server = None
    saved = apply_env({})
    try:
        if mode == "connect":
            saved = apply_env({"TMPDIR": str(base / "scratch"), "PYTHONPATH": str(HERE)})
            server = ConnectServer(base / "scratch", master="local[2]", driver_memory="6g")
            spec.update(url=server.url, worker_pids=[server.process.pid])
        report = bench_spark.run_child(__file__, spec, env, f"{mode} {run}")
        report["server_start_seconds"] = server.start_seconds if server else None
        if run == "arrow":
            report["verified"] = report["written_rows"] == report["rows"]
        else:
            report["verified"] = bench_spark._index_rows(json.loads((out / "index.json").read_text())) == report["rows"]
        return report
    finally:
        if server is not None:
            server.stop()
        restore_env(saved)
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--table", default="floats", choices=bench_spark.TABLES)
    parser.add_argument("--runs", default="ours,arrow", help="comma list of: ours, arrow")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "mds-bench-spark")
    parser.add_argument("--out", default=str(HERE / "results-spark-connect-latest.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    started = time.perf_counter()
    table, runs = args.table, [r for r in RUNS if r in args.runs.split(",")]
    source = args.work / f"input-{table}-{args.rows}"
    bench_spark.generate(source, table, args.rows)
    load = os.getloadavg()
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.reps):
        for run in runs:
            for mode in ("classic", "connect"):
                report = measure(mode, run, args.work, source, bench_spark.COLUMNS[table])
                results.setdefault((mode, run), []).append(report)
                print(
                    f"{mode} {run} rep {rep + 1}: {report['seconds']:.2f} s, cpu {report['cpu_seconds']:.2f} s, "
                    f"verified {report['verified']}",
                    flush=True,
                )
    wall = time.perf_counter() - started
    settings = (
        f"--rows {args.rows:,}, --reps {args.reps}, table {table}, runs {','.join(runs)}; load average "
        f"at the start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) on {os.cpu_count()} cores"
    )
    lines = harness.header("Spark → MDS over Spark Connect and on a classic session", wall, settings)
    lines += [
        f"`{table}` table, {args.rows:,} rows: {bench_spark.TABLE_TEXT[table]}.",
        "",
        "| run | session | rows/s | seconds, median [min–max] | CPU seconds, median [min–max] | rows checked |",
        "|---|---|--:|--:|--:|---|",
    ]
    for run in runs:
        for mode in ("classic", "connect"):
            got = results[(mode, run)]
            secs = [r["seconds"] for r in got]
            checked = "yes" if all(r["verified"] for r in got) else "**NO**"
            where = "`local[2]`, classic" if mode == "classic" else "Spark Connect server, `local[2]`"
            lines.append(
                f"| {bench_spark.LABELS[RUNS[run]]} | {where} | {harness.fmt(args.rows / harness.median(secs))} "
                f"| {harness.spread(secs)} | {harness.spread([r['cpu_seconds'] for r in got])} | {checked} |"
            )
    lines += ["", "| ratio (of medians [min–max of the repetitions]) | value |", "|---|---|"]
    for run in runs:
        connect, classic = ([r["seconds"] for r in results[(m, run)]] for m in ("connect", "classic"))
        target = 1.25 if run == "ours" else None
        ratio = harness.ratio_of_medians(connect, classic)
        cell = harness.ratio_cell(ratio, target, at_most=True) if target else harness.ratio_cell(ratio)
        lines.append(f"| {bench_spark.LABELS[RUNS[run]].split(':')[0]}: Connect time ÷ classic time | {cell} |")
    if "ours" in runs:
        lines += [
            "",
            "Where ours' time goes (seconds, medians, timed inside the call; the rest is argument checks, "
            "the schema and planning):",
            "",
            "| step | classic | Spark Connect |",
            "|---|--:|--:|",
        ]
        for label in PHASES:
            cells = [
                harness.median(r["phases"].get(label, 0.0) for r in results[(m, "ours")])
                for m in ("classic", "connect")
            ]
            lines.append(f"| {label} | {cells[0]:.2f} | {cells[1]:.2f} |")
        totals = [harness.median(r["seconds"] for r in results[(m, "ours")]) for m in ("classic", "connect")]
        lines.append(f"| the whole call | {totals[0]:.2f} | {totals[1]:.2f} |")
    starts = [r["server_start_seconds"] for r in results[("connect", runs[0])]]
    lines += ["", f"Connect server start (not timed): {harness.spread(starts)} s.", ""]
    harness.write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
