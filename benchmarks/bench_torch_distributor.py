"""TorchDistributor beside plain torchrun: the same training loop (benchmarks/torch_train.py, an epoch of
``StreamingDataLoader`` over a Volume, every payload byte consumed) started both ways, two processes,
a cold cache each run, repetitions interleaved.

The Volume is the loopback Files API server of testsupport/databricks_files.py (in this process's threads),
so the figures compare the two launchers on the same store, not Databricks' network. Reported:
the loop's samples/s (slowest rank, construction to last batch), the wall time of the whole run
(launch included), and CPU seconds of the process tree.

    .venv/bin/python benchmarks/bench_torch_distributor.py [--samples 20000] [--reps 3] [--quick] [--out FILE]
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import Span, fmt, header, median, ratio_cell, ratio_of_medians, spread, write_report
from benchmarks.torch_train import loop


def write_dataset(remote: str, samples: int) -> int:
    from mds_core import MDSWriter

    rng = np.random.default_rng(0)
    payload = 0
    with MDSWriter(out=remote, columns={"id": "int64", "x": "ndarray:uint8:2048"}, size_limit=1 << 22) as out:
        for i in range(samples):
            x = rng.integers(0, 255, 2048, dtype=np.uint8)
            out.write({"id": i, "x": x})
            payload += x.nbytes
    return payload


def run_distributor(args: list[str]) -> None:
    from pyspark.ml.torch.distributor import TorchDistributor

    TorchDistributor(num_processes=2, local_mode=True, use_gpu=False).run(loop, *args)


def run_torchrun(args: list[str]) -> None:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2"]
    subprocess.run([*command, str(ROOT / "benchmarks" / "torch_train.py"), *args], check=True, capture_output=True)


def measure(kind: str, server, remote: str, work: Path, rep: int) -> dict[str, float]:
    out = str(work / f"{kind}-{rep}")
    args = [server.endpoint, server.token, remote, str(work / f"cache-{kind}-{rep}"), out]
    with Span() as span:
        (run_distributor if kind == "TorchDistributor" else run_torchrun)(args)
    ranks = [json.loads(Path(f"{out}.rank{r}.json").read_text()) for r in (0, 1)]
    samples, slowest = sum(r["samples"] for r in ranks), max(r["seconds"] for r in ranks)
    return {"wall": span.seconds, "cpu": span.cpu_seconds, "loop_rate": samples / slowest, "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results-torch-distributor-latest.md"))
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 samples, one repetition")
    options = parser.parse_args()
    if options.quick:
        options.samples, options.reps = 2000, 1
    started = time.perf_counter()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from testsupport.databricks_files import FilesApiServer

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    server = FilesApiServer()
    os.environ.update(server.env(server.endpoint))  # the driver writes the dataset; the loops set their own
    remote = f"{server.new_root()}/bench"
    payload = write_dataset(remote, options.samples)
    runs: dict[str, list[dict[str, float]]] = {"torchrun": [], "TorchDistributor": []}
    with tempfile.TemporaryDirectory() as scratch:
        for rep in range(options.reps):
            for kind in runs:  # interleaved, so drift hits both
                runs[kind].append(measure(kind, server, remote, Path(scratch), rep))
    spark.stop()
    server.stop()
    assert all(run["samples"] >= options.samples for kind in runs.values() for run in kind)
    lines = header(
        "TorchDistributor beside torchrun",
        time.perf_counter() - started,
        (
            f"{options.samples:,} samples of 2 KiB ({payload / 2**20:.0f} MiB) on the loopback Files API server, "
            f"2 processes (gloo), batch 64, 1 DataLoader worker each, cold cache, {options.reps} repetitions"
        ),
    )
    lines += ["", "| launcher | loop samples/s, median [range] | wall s incl. launch | CPU s |", "|---|--:|--:|--:|"]
    for kind, results in runs.items():
        rates = [r["loop_rate"] for r in results]
        lines.append(
            f"| {kind} | {spread(rates, 0)} | {fmt(median([r['wall'] for r in results]), 1)} "
            f"| {fmt(median([r['cpu'] for r in results]), 1)} |"
        )
    rate = ratio_of_medians(
        [r["loop_rate"] for r in runs["TorchDistributor"]], [r["loop_rate"] for r in runs["torchrun"]]
    )
    wall = ratio_of_medians([r["wall"] for r in runs["TorchDistributor"]], [r["wall"] for r in runs["torchrun"]])
    lines += ["", f"TorchDistributor ÷ torchrun: loop rate {ratio_cell(rate)}, wall time {ratio_cell(wall)}."]
    write_report("\n".join(lines), options.out)


if __name__ == "__main__":
    main()
