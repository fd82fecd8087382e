#!/usr/bin/env python3
"""Scale benchmark: one node of 8 ranks × 2 DataLoader workers, as real processes, over 10⁶-10⁸ small samples.

For mds_core and Mosaic Streaming 0.13, on the same MDS data (one ``int64`` and one ``uint16[4]`` column,
16 bytes a sample, in 10², 10³ and 10⁴ shards on local disk), each run starts ``--ranks`` rank
processes that join a gloo group, import torch and the library, and wait. On one signal every rank
builds ``StreamingDataset(shuffle=True)``, loads a resume state if the run has one, builds the
library's ``StreamingDataLoader`` (2 workers, batch 256) and takes its first batch. Measured:

- construction → first batch: from the first rank's signal to the last rank's first batch;
- the same on a resume at 10% and at 90% of the epoch (a state dict of the reference's shape, which
  both libraries load);
- the node's memory once every rank has its first batch: the proportional set size (PSS) of every
  rank and worker, plus the run's shared files once each (Mosaic's /dev/shm segments, mds_core's job folder);
  the part beyond what the ranks held after their imports; and the largest peak RSS of one
  process (the one that built the epoch's order).

The epoch's order alone (time and memory) is `bench_streaming.py --order-samples`. LitData is not in
this run yet: it reads its own format, which its writer would take hours to write at 10⁸ samples
here, and its resume state is made by its loader, per worker, so no state at the same point can be
given to it. With ``--store s3`` the ranks read the loopback S3 (moto, ``scale_s3.py``) into a fresh
cache each run, and the report adds the node's requests: index GETs, shard GETs, the rest. Run with
the benchmark venv::

    benchmarks/.venv/bin/python benchmarks/bench_scale.py                      # 10⁶ and 10⁷
    benchmarks/.venv/bin/python benchmarks/bench_scale.py --sizes 1e6:100,1e7:1000,1e8:10000
    benchmarks/.venv/bin/python benchmarks/bench_scale.py --store s3 --out benchmarks/results-scale-s3-latest.md
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness
from node_memory import node_bytes, node_processes, peak_bytes

if TYPE_CHECKING:
    from scale_s3 import ScaleS3

# scale_s3 (and testsupport) are imported in this process only, never in the ranks: with them
# imported there, mds_core's node grew 0.83 GiB beyond its imports at 10⁶ instead of 0.29 (not
# explained yet; found when a local run after the S3 change gave other figures).

LIBRARIES = {"ours": "mds_core", "mosaic": "streaming"}  # the modules
NAMES = {"ours": "mds_core", "mosaic": "Mosaic"}  # as the report names them
COLUMNS = {"id": "int64", "tokens": "ndarray:uint16:4"}
SAMPLE_BYTES = 16
SEED, CANONICAL_NODES = 17, 8
POINTS = {"start": 0.0, "resume 10%": 0.1, "resume 90%": 0.9}


# ----------------------------------------------------------------------------- data


def write_dataset(root: Path, samples: int, shards: int) -> None:
    """``samples`` rows in ``shards`` shards, written by mds_core (the reference's bytes), a million at a time."""
    import numpy as np

    from mds_core import MDSWriter

    per_shard = -(-samples // shards)
    size_limit = 4 * (per_shard + 2) + 512 + per_shard * SAMPLE_BYTES  # offsets, the header, the samples
    layout = np.dtype([("id", "<i8"), ("tokens", "<u2", 4)])  # both columns fixed-size, in name order
    step = 1 << 20
    with MDSWriter(out=str(root), columns=COLUMNS, size_limit=size_limit) as writer:
        for start in range(0, samples, step):
            rows = np.zeros(min(step, samples - start), layout)
            rows["id"] = np.arange(start, start + len(rows))
            rows["tokens"] = (rows["id"] % 65536)[:, None]
            writer.write_encoded_many(rows, np.full(len(rows), SAMPLE_BYTES))


# ----------------------------------------------------------------------------- one rank


def build_loader(spec: dict[str, Any]) -> Any:
    """The library's shuffled dataset (resumed from the spec's ``state`` if given) in its own loader.

    Local: the dataset at ``root``. On the store: ``remote``, cached in ``root`` (a fresh folder per run).
    """
    module = __import__(LIBRARIES[spec["library"]])
    options: dict[str, Any] = dict(shuffle=True, shuffle_seed=SEED, num_canonical_nodes=CANONICAL_NODES)
    if spec["remote"]:
        options["remote"] = spec["remote"]
    batch_size, state = spec["batch_size"], spec["state"]
    dataset = module.StreamingDataset(local=spec["root"], batch_size=batch_size, **options)
    if state is not None:
        dataset.load_state_dict(state)
    return module.StreamingDataLoader(dataset, batch_size=batch_size, num_workers=spec["workers"])


def rank_main(spec: dict[str, Any]) -> None:
    """One rank: join the group, wait for the signal, time construction to the first batch, then wait."""
    import torch
    import torch.distributed as dist

    module = __import__(LIBRARIES[spec["library"]])
    # mds_core imports its classes on first use: they are imported here, outside the timing, as Mosaic's are.
    assert module.StreamingDataset and module.StreamingDataLoader
    dist.init_process_group("gloo")
    print("ready", flush=True)
    sys.stdin.readline()
    go = time.time()
    loader = build_loader(spec)
    batches = iter(loader)  # kept until the end: its workers are measured
    batch = next(batches)
    first = time.time()
    rows = int(torch.as_tensor(batch["id"]).numel())
    print(json.dumps(dict(go=go, first=first, rows=rows)), flush=True)
    sys.stdin.readline()  # the node's memory is measured now
    os._exit(0)  # its workers see their parent end and stop; nothing else to tear down


# ----------------------------------------------------------------------------- one node


def tell(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


class RankFailed(RuntimeError):
    """A rank ended before it answered (its traceback is on stderr)."""


def hear(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RankFailed(f"rank process {proc.pid} ended before it answered")
    return line


def run_node(
    library: str, root: Path, samples: int, point: float, args: Any, jobs: Path, store: ScaleS3 | None = None
) -> dict[str, Any]:
    """One node's ranks from the signal to every first batch; the node's memory (and requests) then."""
    global_batch = args.ranks * args.batch_size
    sample_in_epoch = int(samples * point) // global_batch * global_batch
    state = None
    if point:
        state = dict(
            epoch=0,
            sample_in_epoch=sample_in_epoch,
            num_canonical_nodes=CANONICAL_NODES,
            shuffle_seed=SEED,
            initial_physical_nodes=1,
        )
    harness.clean_reference_shm()
    shm_before = set(os.listdir("/dev/shm"))
    from scale_s3 import PROJECT_PYTHON

    from testsupport.fault_proxy import free_port

    port = free_port()
    remote, python, cache = None, sys.executable, jobs.parent / f"cache-{library}"
    if store is not None:  # a fresh cache: every run fetches what it reads
        remote, python, root = store.url(root), PROJECT_PYTHON if library == "ours" else python, cache
        shutil.rmtree(cache, ignore_errors=True)
    procs = []
    for rank in range(args.ranks):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(args.ranks),
            LOCAL_WORLD_SIZE=str(args.ranks),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            MDS_JOB_ROOT=str(jobs),
        )
        spec = dict(
            library=library,
            root=str(root),
            remote=remote,
            batch_size=args.batch_size,
            workers=args.workers,
            state=state,
        )
        command = [python, __file__, "--_serve", json.dumps(spec)]
        procs.append(subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    try:
        for proc in procs:
            if hear(proc).strip() != "ready":
                raise RuntimeError(f"{library} rank did not start")
        imported = node_bytes(node_processes(procs), jobs, shm_before)  # torch and the library, in every rank
        mark = store.mark() if store else 0
        for proc in procs:
            tell(proc, "go")
        ranks = [json.loads(hear(proc)) for proc in procs]
        processes = node_processes(procs)
        memory = node_bytes(processes, jobs, shm_before)
        requests = store.requests_since(mark) if store else {}
        ordered_at = wait_for_whole_order(jobs) if library == "ours" else max(r["first"] for r in ranks)
        processes = node_processes(procs)
        ordered, peak = node_bytes(processes, jobs, shm_before), peak_bytes(processes)
        for proc in procs:
            tell(proc, "exit")
        for proc in procs:
            proc.wait(timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        harness.clean_reference_shm()
        shutil.rmtree(jobs, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    if any(r["rows"] != args.batch_size for r in ranks):
        raise RuntimeError(f"{library}: a first batch is not {args.batch_size} rows: {ranks}")
    return dict(
        seconds=max(r["first"] for r in ranks) - min(r["go"] for r in ranks),
        node_gib=memory / 2**30,
        grown_gib=(memory - imported) / 2**30,
        ordered_seconds=ordered_at - min(r["go"] for r in ranks),
        ordered_gib=ordered / 2**30,
        peak_gib=peak / 2**30,
        sample_in_epoch=sample_in_epoch,
        **requests,
    )


def _side_by_side(
    results: dict[tuple[int, str, str], list[dict[str, Any]]], sizes: list[tuple[int, int]]
) -> Iterator[tuple[int, int, str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Per size and point, in the report's order: mds_core's runs and Mosaic's."""
    for samples, shards in sizes:
        for point in POINTS:
            yield samples, shards, point, results[(samples, point, "ours")], results[(samples, point, "mosaic")]


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return harness.median_of(r[key] for r in rows)


def wait_for_whole_order(jobs: Path, timeout: float = 600.0) -> float:
    """When mds_core's node had made the whole epoch's order: its first batches come before it (``StagedRow``).

    The node's memory is measured again then, and its largest process's peak, which the making of the order sets.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(not path.name.endswith("-head.npy") for path in jobs.rglob("work-e0-*.npy")):
            done = time.time()
            time.sleep(1.0)  # the process that made it frees its temporaries after storing it
            return done
        time.sleep(0.05)
    raise RuntimeError(f"no whole epoch order appeared in {jobs} within {timeout:.0f} s")


# ----------------------------------------------------------------------------- report


def run_until_done(library: str, root: Path, samples: int, point: float, *rest: Any) -> dict[str, Any]:
    """``run_node``, run again (up to twice) where a rank failed; the result counts the failed runs."""
    for failed in range(3):
        try:
            return dict(run_node(library, root, samples, point, *rest), failed_runs=failed)
        except RankFailed as err:
            print(f"  {library} at {samples:.0e}, {point:.0%}: {err}; running it again", file=sys.stderr)
    raise RuntimeError(f"{library} failed three runs in a row at {samples:.0e} samples, {point:.0%} of the epoch")


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``1e6:100,1e7:1000`` as [(samples, shards)]."""
    return [(int(float(a)), int(float(b))) for a, b in (part.split(":") for part in text.split(","))]


def report(results: dict[tuple[int, str, str], list[dict[str, Any]]], sizes: list[tuple[int, int]], args: Any) -> str:
    """The report's markdown: one row per size and point, mds_core beside Mosaic."""
    lines = harness.header(
        "Scale benchmark: one node of ranks × DataLoader workers, mds_core vs mosaicml-streaming",
        args.wall,
        f"{args.ranks} ranks × {args.workers} workers, batch {args.batch_size}, reps={args.reps} (median; "
        f"[min–max] of the per-rep ratios), py1e, {CANONICAL_NODES} canonical nodes, "
        f"{'local disk' if args.store == 'local' else 'the loopback S3 (moto), a fresh cache per run'}, "
        f"{SAMPLE_BYTES}-byte samples",
    )
    lines += [
        "| samples (shards) | point | mds_core s | Mosaic s | mds_core ÷ Mosaic | node memory GiB: "
        "mds_core / Mosaic | ÷ | beyond the imports: mds_core / Mosaic | ÷ |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for samples, shards, point, ours, theirs in _side_by_side(results, sizes):
        time_ratio = harness.ratio_cell(
            harness.ratio_of_medians([r["seconds"] for r in ours], [r["seconds"] for r in theirs]), 0.5, True
        )
        grown = harness.ratio_cell(
            harness.ratio_of_medians([r["grown_gib"] for r in ours], [r["grown_gib"] for r in theirs]), 0.5, True
        )
        lines.append(
            f"| {samples:.0e} ({shards:,}) | {point} | {_median(ours, 'seconds'):.2f} | {_median(theirs, 'seconds'):.2f} "
            f"| {time_ratio} | {_median(ours, 'node_gib'):.2f} / {_median(theirs, 'node_gib'):.2f} "
            f"| {_median(ours, 'node_gib') / _median(theirs, 'node_gib'):.2f}× "
            f"| {_median(ours, 'grown_gib'):.2f} / {_median(theirs, 'grown_gib'):.2f} | {grown} |"
        )
    failed = ", ".join(
        f"{name} {sum(r['failed_runs'] for key, rows in results.items() if key[2] == lib for r in rows)}"
        for lib, name in NAMES.items()
    )
    lines += ["", f"Runs in which a rank failed before its first batch (each run again): {failed}"]
    from scale_s3 import request_table

    extra = request_table(results, sizes, POINTS, NAMES) if args.store == "s3" else []
    return "\n".join(lines + once_ordered(results, sizes) + growth(results, sizes) + extra) + "\n"


def once_ordered(results: dict[tuple[int, str, str], list[dict[str, Any]]], sizes: list[tuple[int, int]]) -> list[str]:
    """The node once the whole epoch's order is made: mds_core makes it after the first batches, Mosaic before."""
    lines = [
        "",
        "Once the whole epoch's order is made (mds_core makes it on a thread after the first batches; Mosaic before "
        "them), medians: seconds from the signal, the node's memory, and the largest process's peak RSS "
        "(`VmHWM`, set by the process that made the order):",
        "",
        "| samples (shards) | point | seconds: mds_core / Mosaic | node memory GiB: mds_core / Mosaic | ÷ "
        "| largest peak GiB: mds_core / Mosaic |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for samples, shards, point, ours, theirs in _side_by_side(results, sizes):
        lines.append(
            f"| {samples:.0e} ({shards:,}) | {point} "
            f"| {_median(ours, 'ordered_seconds'):.2f} / {_median(theirs, 'ordered_seconds'):.2f} "
            f"| {_median(ours, 'ordered_gib'):.2f} / {_median(theirs, 'ordered_gib'):.2f} "
            f"| {_median(ours, 'ordered_gib') / _median(theirs, 'ordered_gib'):.2f}× "
            f"| {_median(ours, 'peak_gib'):.2f} / {_median(theirs, 'peak_gib'):.2f} |"
        )
    return lines


def growth(results: dict[tuple[int, str, str], list[dict[str, Any]]], sizes: list[tuple[int, int]]) -> list[str]:
    """How each library's time and memory grow with the samples, and resume at 90% against 10%."""
    first, last = sizes[0][0], sizes[-1][0]
    lines = [
        "",
        f"Growth from {first:.0e} to {last:.0e} samples ({last // first}× the samples), medians; and resume at "
        "90% ÷ resume at 10% at each size:",
        "",
        "| library | point | time × | memory beyond the imports × | resume 90% ÷ 10% |",
        "|---|---|--:|--:|---|",
    ]
    for library, name in NAMES.items():

        def med(samples: int, point: str, key: str) -> float:
            return harness.median_of(r[key] for r in results[(samples, point, library)])

        resumes = ", ".join(
            f"{med(n, 'resume 90%', 'seconds') / med(n, 'resume 10%', 'seconds'):.2f}×" for n, _ in sizes
        )
        for point in POINTS:
            time_growth = med(last, point, "seconds") / med(first, point, "seconds")
            memory_growth = med(last, point, "grown_gib") / max(med(first, point, "grown_gib"), 1e-9)
            note = resumes if point == "start" else ""
            lines.append(f"| {name} | {point} | {time_growth:.2f}× | {memory_growth:.2f}× | {note} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = harness.option_parser(
        __doc__,
        [
            ("--sizes", "1e6:100,1e7:1000", "samples:shards, comma-separated"),
            ("--ranks", 8, "ranks on the node"),
            ("--workers", 2, "DataLoader workers per rank"),
            ("--batch-size", 256, None),
            ("--reps", 3, "repetitions, interleaved"),
            ("--data", "", "where the datasets are kept between runs (default: a temporary folder)"),
            ("--store", "local", "local, or s3: the loopback S3 (moto), each run from a fresh cache"),
            ("--out", str(HERE / "results-scale-latest.md"), "markdown output file"),
        ],
    )
    args = parser.parse_args(argv)
    if args._serve:
        rank_main(json.loads(args._serve))
        return 0
    harness.compile_project()
    started = time.perf_counter()
    data = Path(args.data or tempfile.mkdtemp(prefix="bench-scale-"))
    sizes = parse_sizes(args.sizes)
    results: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    from scale_s3 import ScaleS3  # (puts testsupport on the path)

    store = ScaleS3(data) if args.store == "s3" else None
    for samples, shards in sizes:
        root = data / f"{samples}-{shards}"
        if not (root / "index.json").exists():
            print(f"writing {samples:,} samples in {shards:,} shards", file=sys.stderr)
            write_dataset(root, samples, shards)
        for rep in range(args.reps):
            for point, fraction in POINTS.items():
                for library in LIBRARIES:
                    got = run_until_done(library, root, samples, fraction, args, data / "jobs", store)
                    results.setdefault((samples, point, library), []).append(got)
                    print(f"  {samples:.0e} rep {rep} {point} {library}: {got}", file=sys.stderr)
    if store is not None:
        store.stop()
    args.wall = time.perf_counter() - started
    text = report(results, sizes, args)
    harness.write_report(text, args.out)
    if not args.data:
        shutil.rmtree(data, ignore_errors=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
