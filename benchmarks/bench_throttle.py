"""Issue 38, item 3: an epoch on a store that says no, against the same epoch on one that does not.

For each size in ``--samples``, a dataset (an int64 ``id`` and 2 KiB of random ``payload`` per sample, in shards
of about 0.9 MB: 92 shards for 40,000 samples, 920 for 400,000) on the loopback S3 (moto), or with ``--store
volumes`` on the tests' Files API server (Unity Catalog volumes, refusing with the Databricks APIs' JSON errors),
read through a ``FaultProxy``. The short epoch shows the wait for the last shards (the order's first samples come from every
shard); the long one the throughput. In the throttled run the proxy's seeded ``RandomFaults`` answer 20% of
the dataset's GETs with ``503 SlowDown`` (no ``Retry-After``: the client backs off with jitter) or ``429`` with
``Retry-After: 1`` (``--retry-after``), and hold 1% for 2 s before answering; in the plain run it passes
everything. Each run is a
fresh process with a fresh cache: ``StreamingDataset`` (shuffled, batch 256, no workers) iterated once, every
payload byte through the harness's consumer. The two kinds of run are interleaved, ``--reps`` each; the report
gives medians, the throttled / plain throughput, the shard GETs per shard, and checks every epoch read every
sample exactly once.

    .venv/bin/python benchmarks/bench_throttle.py [--samples 40000,400000] [--reps 3] [--retry-after 1]
        [--store s3|volumes] [--out benchmarks/results-throttle-latest.md]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # testsupport: the tests' S3 server and fault proxy

from harness import (
    Consumer,
    compile_project,
    header,
    median_of,
    option_parser,
    ratio_cell,
    ratio_of_medians,
    spread,
    tree_cpu_seconds,
    write_report,
)

from testsupport.databricks_files import FilesApiServer
from testsupport.fault_proxy import FaultProxy, RandomFaults, apply_env, restore_env
from testsupport.s3 import MotoServer

DATA = r"/(index\.json|shard\.\d+\.mds)$"
PAYLOAD = 2048
SHARD_BYTES = 900_000


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One epoch in this fresh process: seconds, CPU seconds, samples, distinct ids, bytes consumed."""
    from mds_core import StreamingDataset

    consume, seen = Consumer(), set()
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    dataset = StreamingDataset(remote=spec["remote"], local=spec["cache"], batch_size=256, shuffle=True)
    samples = 0
    for sample in dataset:
        consume(sample)
        seen.add(int(sample["id"]))
        samples += 1
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "cpu": tree_cpu_seconds() - cpu0, "samples": samples, "distinct": len(seen)}


def run_child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--_serve", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, **env})
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{spec['kind']} run failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def write_dataset(remote: str, samples: int) -> int:
    """The dataset at ``remote``; returns its number of shards."""
    from mds_core import MDSWriter
    from mds_core.storage.remote import open_store

    with MDSWriter(out=remote, columns={"id": "int64", "payload": "bytes"}, size_limit=SHARD_BYTES) as writer:
        for index in range(samples):
            writer.write({"id": index, "payload": os.urandom(PAYLOAD)})
    return len([key for key in open_store(remote).list() if key.endswith(".mds")])


def epochs(work: Path, samples: int, reps: int, retry_after: int, store: str) -> dict[str, Any]:
    server: Any = MotoServer(work, count_requests=False) if store == "s3" else FilesApiServer(work)  # the proxy counts
    proxy = FaultProxy(server.endpoint)
    proxy.json_refusals = store == "volumes"  # the Files API refuses as the Databricks APIs do
    saved = apply_env(server.env(server.endpoint))  # the writer goes straight to the server
    try:
        remote = f"{server.new_root()}/set"
        shards = write_dataset(remote, samples)
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "throttled": []}
        for rep in range(reps):
            for kind in ("plain", "throttled"):
                proxy.random = None if kind == "plain" else _faults(rep, retry_after)
                before = len(proxy.requests)
                spec = {"kind": kind, "remote": remote, "cache": str(work / f"cache-{kind}-{rep}")}
                result = run_child(spec, server.env(proxy.endpoint))
                gets = [path for method, path in proxy.requests[before:] if method == "GET" and re.search(DATA, path)]
                result |= {"gets": len(gets), "injected": dict(proxy.random.injected) if proxy.random else {}}
                runs[kind].append(result)
                print(f"  {kind} rep {rep}: {result}", file=sys.stderr)
    finally:
        proxy.stop()
        server.stop()
        restore_env(saved)
    return {"shards": shards, "samples": samples, **runs}


def _faults(seed: int, retry_after: int) -> RandomFaults:
    actions: dict[str, float] = {"slowdown": 0, "too_many": retry_after, "delay": 2}
    return RandomFaults(
        0.21, actions=actions, weights={"slowdown": 10, "too_many": 10, "delay": 1}, path=DATA, seed=seed
    )


def lines_of(result: dict[str, Any]) -> list[str]:
    shards, samples = result["shards"], result["samples"]
    rows = [
        "| run | samples/s (median) | seconds [min–max] | CPU s | GETs per file, each run | refused / stalled, each run | exactly once |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    rates = {}
    for kind in ("plain", "throttled"):
        runs = result[kind]
        rates[kind] = [samples / run["seconds"] for run in runs]
        seconds = [run["seconds"] for run in runs]
        per_file = [run["gets"] / (shards + 1) for run in runs]
        refused = [run["injected"].get("slowdown", 0) + run["injected"].get("too_many", 0) for run in runs]
        stalled = [run["injected"].get("delay", 0) for run in runs]
        once = all(run["samples"] == run["distinct"] == samples for run in runs)
        rows.append(
            f"| {kind} | {median_of(rates[kind]):,.0f} | {spread(seconds, 2)} | "
            f"{median_of(run['cpu'] for run in runs):.1f} | {', '.join(f'{x:.2f}' for x in per_file)} | "
            f"{', '.join(f'{r} / {s}' for r, s in zip(refused, stalled, strict=True))} | {'yes' if once else 'NO'} |"
        )
    ratio = ratio_of_medians(rates["throttled"], rates["plain"])
    return [
        f"{samples:,} samples of {PAYLOAD} bytes in {shards} shards; requests per file counts every GET of a shard "
        "or the index (retries included) over the files.",
        "",
        *rows,
        "",
        f"Throttled throughput ÷ plain: {ratio_cell(ratio, 0.8)}.",
    ]


OPTIONS = (
    ("--samples", "40000,400000", "samples in each dataset, comma-separated"),
    ("--reps", 3, "runs of each kind (medians of)"),
    ("--retry-after", 1, "the Retry-After of the 429s, in seconds (0: none, the client backs off)"),
    ("--store", "s3", "s3 (moto) or volumes (the Files API server of the tests, in this process)"),
    ("--out", "benchmarks/results-throttle-latest.md", "the markdown report"),
)


def main() -> None:
    args = option_parser(__doc__ or "", OPTIONS).parse_args()
    if args._serve:
        print("RESULT " + json.dumps(child(json.loads(args._serve))), flush=True)
        return
    compile_project()
    began, load = time.perf_counter(), os.getloadavg()
    sections: list[str] = []
    for samples in (int(size) for size in args.samples.split(",")):
        with tempfile.TemporaryDirectory(prefix="mds-bench-throttle-") as work:
            sections += ["", *lines_of(epochs(Path(work), samples, args.reps, args.retry_after, args.store))]
    server = "moto" if args.store == "s3" else "the Files API server (Unity Catalog volumes)"
    settings = (
        f"{args.reps} interleaved runs of each kind, each a fresh process and cache; {server} + FaultProxy on "
        "127.0.0.1; "
        f"429s with Retry-After: {args.retry_after or 'none'}; "
        f"load average at the start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, at the end {os.getloadavg()[0]:.1f}"
    )
    report = header("An epoch on a throttling store (issue 38, item 3)", time.perf_counter() - began, settings)
    write_report("\n".join([*report, *sections]), args.out)


if __name__ == "__main__":
    main()
