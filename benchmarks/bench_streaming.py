#!/usr/bin/env python3
"""Streaming benchmark: mds_core.StreamingDataset vs mosaicml-streaming vs litdata.

One run writes each workload once (the reference's ``streaming.MDSWriter`` for the MDS readers,
litdata's ``BinaryWriter`` for litdata) and measures, on that same data:

1. shuffled single-process iteration (``shuffle=True``; py1e for the MDS readers);
2. one epoch through each library's ``StreamingDataLoader`` (2 workers, batch size 256);
3. cold start: a newly started interpreter, from ``Popen`` to its first shuffled sample;
4. resume latency: construct + ``load_state_dict`` (a state taken by the library's own
   ``StreamingDataLoader`` at 50% of the epoch) + the first batch, at two dataset sizes;
5. epoch order generation: ``mds_core.order.generate_work`` against the reference's
   ``streaming.base.batching.generate_work`` (random batching, py1e) for ``--order-samples``;
6. telemetry overhead: the same shuffled ``StreamingDataLoader`` epoch of mds_core with
   ``StreamingDataset(telemetry=True)`` and ``telemetry=False``, reps interleaved.

Every sample or batch read is handed to ``harness.Consumer``, which copies every payload byte (the
same for every library); the "consumer limit" is that consumer over the samples already in memory.
Measurements 1, 2, 4 and 5 run through ``harness.Bench``: each in a fresh process forked from a
template process that has only imported one library (so the 2-8 s of imports are not timed),
``--reps`` times, interleaved, medians shown, wall and CPU seconds and peak RSS from
``harness.Span``. Measurement 3 starts a new interpreter per rep (torch imported first by every
library, plus a torch-free line for mds_core) and times everything. Run with the benchmark venv::

    bash benchmarks/setup_env.sh
    benchmarks/.venv/bin/python benchmarks/bench_streaming.py            # full (tens of minutes)
    benchmarks/.venv/bin/python benchmarks/bench_streaming.py --quick    # smoke run (~2 min)
    benchmarks/.venv/bin/python benchmarks/bench_streaming.py --mixed 0 --tokens 0 --resume-sizes '' \
        --order-samples 0 --reps 5                                          # telemetry overhead only
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_format as bf
import harness

WORKLOAD_COLUMNS: dict[str, dict[str, str]] = {
    **bf.WORKLOAD_COLUMNS,  # 'mixed' and 'tokens' (2048 uint16)
    "tiny": {"tokens": "ndarray:uint16:16"},  # small samples: resume latency at scale
}
IMPLS = ["ours", "ref", "litdata"]
OTHERS = ["ref", "litdata"]
LABELS = {"ours": "mds_core", "ref": "streaming 0.13 (reference)", "litdata": "litdata"}


# ----------------------------------------------------------------------------- data
#
# Every workload's tokens start with the sample index (tokens[0] = i & 0xffff,
# tokens[1] = i >> 16), so tokens samples carry an id like 'mixed' does: the same
# "key" identifies a sample in every library's output, which checks coverage and order.


def iter_samples(workload: str, n: int, seed: int) -> Iterator[dict[str, Any]]:
    if workload == "tiny":  # generated in blocks: 10M samples need not sit in memory as dicts
        for start in range(0, n, 1 << 20):
            stop = min(n, start + (1 << 20))
            rng = np.random.default_rng([seed, start])
            block = rng.integers(0, 50257, size=(stop - start, 16), dtype=np.uint16)
            ids = np.arange(start, stop)
            block[:, 0], block[:, 1] = ids & 0xFFFF, ids >> 16
            for row in block:
                yield {"tokens": row}
        return
    samples = bf.make_samples(workload, n, seed)
    if workload == "tokens":
        for i, sample in enumerate(samples):
            sample["tokens"][0], sample["tokens"][1] = i & 0xFFFF, i >> 16
    yield from samples


def sample_key(workload: str, sample: Any) -> int:
    if workload == "mixed":
        return int(sample["id"])
    tokens = sample["tokens"]
    return int(tokens[0]) | int(tokens[1]) << 16


def batch_keys(workload: str, batch: Any) -> list[int]:
    if workload == "mixed":
        return np.asarray(batch["id"]).astype(np.int64).tolist()
    tokens = np.asarray(batch["tokens"]).astype(np.int64)
    return (tokens[:, 0] | tokens[:, 1] << 16).tolist()


def fingerprint(keys: list[int]) -> str:
    return hashlib.sha1(np.asarray(keys, np.int64).tobytes()).hexdigest()[:12]


# ----------------------------------------------------------------------------- measured code


LIBRARIES = {"ours": "mds_core", "ref": "streaming", "litdata": "litdata"}


def import_family(family: str) -> None:
    """What a family's template imports (never timed): torch and the library, as a training script has.

    torch, the library's ``StreamingDataset`` and ``StreamingDataLoader`` (mds_core loads them lazily,
    and its loader imports torch) and the modules the set-up steps use (writers, batching). Nothing
    else: a store client the library imports lazily (s3fs, boto3, obstore) and the client it builds
    are paid in the measurement, as a user's process pays them.
    """
    import torch  # noqa: F401  (a training script has it imported)

    library = importlib.import_module(LIBRARIES[family])
    _ = library.StreamingDataset, library.StreamingDataLoader
    importlib.import_module(
        {"ours": "mds_core.order", "ref": "streaming.base.batching", "litdata": "litdata.streaming.writer"}[family]
    )


def write_dataset(spec: dict[str, Any]) -> None:
    samples = iter_samples(spec["workload"], spec["n"], spec["seed"])
    bf.writer_for(spec["impl"])(spec["dir"], WORKLOAD_COLUMNS[spec["workload"]], samples, spec["size_limit"])


def open_dataset(spec: dict[str, Any]) -> Any:
    """A shuffled StreamingDataset over spec['dir'] (py1e, default seed, canonical nodes).

    With spec['url'] (``bench_remote.py``) it streams from that remote into spec['dir'] as its cache.
    """
    impl, local, url = spec["impl"], spec["dir"], spec.get("url")
    if impl == "ours":
        from mds_core import StreamingDataset

        return StreamingDataset(
            remote=url,
            local=local,
            version=spec.get("version"),
            batch_size=spec["batch_size"],
            shuffle=True,
            shuffle_algo="py1e",
            job_root=spec["job_root"],
            telemetry=spec.get("telemetry", True),
        )
    if impl == "ref":
        from streaming import StreamingDataset as RefStreamingDataset

        return RefStreamingDataset(
            remote=url, local=local, batch_size=spec["batch_size"], shuffle=True, shuffle_algo="py1e"
        )
    import litdata

    if url is None:
        return litdata.StreamingDataset(local, shuffle=True)
    allow_plain_http()
    return litdata.StreamingDataset(url, cache_dir=local, shuffle=True)


def allow_plain_http() -> None:
    """litdata fetches S3 chunks with obstore, which refuses an ``http://`` endpoint unless told.

    Real stores are HTTPS; the loopback server is plain HTTP. The option goes into the client options
    litdata itself passes to obstore, so litdata keeps its own (fastest) download path.
    """
    try:
        from litdata.streaming import downloader
    except ImportError:
        return
    options = getattr(downloader, "_OBSTORE_CLIENT_OPTIONS", None)
    if isinstance(options, dict):
        options["allow_http"] = True


def common_collate(items: list[Any]) -> Any:
    """The one collate every library's loader gets: torch's ``default_collate``, after ``memoryview`` -> ``bytes``.

    litdata returns a ``bytes`` column as a ``memoryview``, which ``default_collate`` takes for a
    sequence (and fails on when the lengths differ); the MDS readers return ``bytes``. Every library
    gets this function, so no library's own collate (mds_core's default batches numpy columns in one
    step) makes a difference the reader does not.
    """
    from torch.utils.data import default_collate

    if items and isinstance(items[0], dict):
        items = [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in item.items()} for item in items]
    return default_collate(items)


def open_loader(spec: dict[str, Any], ds: Any) -> Any:
    """The library's own ``StreamingDataLoader`` over ``ds``, batching with ``common_collate``."""
    loader_class: Any
    if spec["impl"] == "ours":
        import mds_core

        loader_class = mds_core.StreamingDataLoader
    elif spec["impl"] == "ref":
        import streaming

        loader_class = streaming.StreamingDataLoader
    else:
        import litdata

        loader_class = litdata.StreamingDataLoader
    return loader_class(ds, batch_size=spec["batch_size"], num_workers=spec["workers"], collate_fn=common_collate)


def order_sizes(n: int, shard: int) -> list[int]:
    return [shard] * (n // shard) + ([n % shard] if n % shard else [])


def ref_order_standin(sizes: list[int], ncn: int, batch_size: int) -> Any:
    """An object with the attributes of ``streaming.StreamingDataset`` its random batching reads.

    ``streaming.base.batching.generate_work('random', dataset, world, epoch, sample_in_epoch)``
    calls ``dataset.resample_streams(epoch)`` and reads the settings below; the values are what
    ``StreamingDataset.__init__`` and ``__iter__`` set for one unweighted local stream of these
    shards, so the reference's own code runs unchanged (``resample_streams`` is its method).
    """
    from streaming import StreamingDataset as RefStreamingDataset

    class StandIn:
        resample_streams = RefStreamingDataset.resample_streams

    self: Any = StandIn()  # the attributes below are set one by one, as __init__ would
    self.num_streams = 1
    self.samples_per_shard = np.array(sizes, np.int64)
    self.sample_offset_per_shard = self.samples_per_shard.cumsum() - self.samples_per_shard
    self.shard_offset_per_stream = np.zeros(1, np.int64)
    self.shards_per_stream = np.array([len(sizes)], np.int64)
    self.streams = [SimpleNamespace(choose=int(self.samples_per_shard.sum()))]
    self.epoch_size = int(self.samples_per_shard.sum())
    self.sampling_method, self.sampling_granularity = "balanced", 1
    self.shuffle, self.shuffle_algo, self.shuffle_seed = True, "py1e", 9176
    self.epoch_seed_change = True  # shuffle and sampling_method == 'balanced'
    self.num_canonical_nodes, self.batch_size = ncn, batch_size
    self.shuffle_block_size = max(4_000_000 // ncn, 1 << 18)  # the reference's default
    self.partition_algo, self.initial_physical_nodes = "relaxed", None
    return self


def generate_order(spec: dict[str, Any]) -> np.ndarray:
    sizes = order_sizes(spec["n"], spec["shard_samples"])
    nodes, ranks, workers = spec["world"]
    if spec["impl"] == "ours":
        from mds_core.order import OrderSpec, generate_work

        order = OrderSpec(
            shard_sizes=[sizes],
            shuffle=True,
            shuffle_algo="py1e",
            num_canonical_nodes=spec["ncn"],
            batch_size=spec["batch_size"],
        )
        return generate_work(order, nodes, ranks, workers, 0, 0)
    from streaming.base.batching import generate_work as ref_generate_work
    from streaming.base.world import World as RefWorld

    standin = ref_order_standin(sizes, spec["ncn"], spec["batch_size"])
    return ref_generate_work("random", standin, RefWorld(nodes, ranks, workers, 0), 0, 0)


def consumed_bytes(workload: str, n: int, seed: int) -> int:
    """What the consumer must copy for one epoch (the unpacked integers of 'mixed' are not copied)."""
    if workload == "mixed":
        return bf.consumed_bytes(workload, n, seed)
    return n * int(WORKLOAD_COLUMNS[workload]["tokens"].split(":")[-1]) * 2


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement; runs in a fresh process forked from the impl's template."""
    signal.alarm(spec.get("timeout", 0))  # a hung measurement dies: its reply says so
    op, impl = spec["op"], spec["impl"]
    workload: str = spec.get("workload", "")  # "order" measurements have none
    result: dict[str, Any] = {}
    if op == "consumer":  # the consumer alone over the same samples, already in memory
        return harness.consumer_limit(list(iter_samples(workload, spec["n"], spec["seed"])))
    state = pickle.loads(Path(spec["state_file"]).read_bytes()) if op == "resume" else None
    consume = harness.Consumer()
    keys: list[int] = []
    first = ds = loader = None
    os.sync()  # the data set just written must not be written back during the measurement
    with harness.Span() as span:
        if op == "write":  # setup, not reported
            write_dataset(spec)
        elif op == "iterate":  # timed: construct + iterate and consume every sample once
            ds = open_dataset(spec)
            for sample in ds:
                consume(sample)
                if first is None:
                    first = sample
                keys.append(sample_key(workload, sample))
        elif op == "loader":  # timed: construct dataset + loader + one epoch of consumed batches
            ds = open_dataset(spec)
            loader = open_loader(spec, ds)
            for batch in loader:
                consume(batch)
                keys += batch_keys(workload, batch)
        elif op == "resume-setup":  # setup: iterate half an epoch, take the loader's state dict
            ds = open_dataset(spec)
            loader = open_loader(spec, ds)
            it = iter(loader)
            for _ in range(spec["n"] // 2 // spec["batch_size"]):
                keys += batch_keys(workload, next(it))
            Path(spec["state_file"]).write_bytes(pickle.dumps(loader.state_dict()))
            result["expected"] = batch_keys(workload, next(it))
            result["consumed_samples"] = len(keys)
            del it
        elif op == "resume":  # timed: construct + load_state_dict + first batch, consumed
            ds = open_dataset(spec)
            loader = open_loader(spec, ds)
            loader.load_state_dict(state)
            it = iter(loader)
            batch = next(it)
            consume(batch)
            keys = batch_keys(workload, batch)
        elif op == "order":  # timed: generate one epoch's work
            work = generate_order(spec)
    if op in ("resume", "loader"):
        it = None  # shut the workers down (joins them), so their peak RSS and CPU are counted
        harness.shut_down_workers(loader)
        span.stop_cpu()
    result.update(span.result(), workers_peak_mb=harness.children_peak_mb(), consumed=consume.consumed)

    # not timed: what came back
    if op in ("iterate", "loader"):
        result.update(
            count=len(keys),
            order=fingerprint(keys),
            complete=sorted(keys) == list(range(spec["n"])),
            # (a loader also collates the integers into tensors, which the consumer copies)
            all_bytes=consume.consumed >= consumed_bytes(workload, spec["n"], spec["seed"]),
        )
        if first is not None:  # the first sample's content against the generated data
            key = sample_key(workload, first)
            want = next(s for i, s in enumerate(iter_samples(workload, spec["n"], spec["seed"])) if i == key)
            result["content_ok"] = bf.same_sample(first, want)
    if "telemetry" in spec and loader is not None:  # what telemetry counted (zero when off)
        totals = loader.metrics()["totals"]
        result.update(telemetry_samples=totals["samples"], decode_seconds=totals["decode_seconds"])
    if op == "resume":
        result.update(batch=keys)
    elif op == "order":
        work = np.ascontiguousarray(work, dtype=np.int64)
        result.update(
            shape=list(work.shape), order=hashlib.sha1(work.data).hexdigest()[:12], valid=int((work >= 0).sum())
        )
    if impl == "ref" and ds is not None:
        result["shm_prefix"] = int(getattr(ds, "_shm_prefix_int", -1))
    return result


# ----------------------------------------------------------------------------- cold start

COLD_CHILD = r"""
import sys, json, time
impl, path, batch_size, job_root, workload, with_torch, here = sys.argv[1:8]
if with_torch == "1":
    import torch  # what a training script has imported before it builds its dataset
after_torch = time.perf_counter()  # the library's own part starts here: its import, construction, first sample
sys.path.insert(0, here)
import harness
if impl == "ours":
    from mds_core import StreamingDataset
    ds = StreamingDataset(local=path, batch_size=int(batch_size), shuffle=True, shuffle_algo="py1e",
                          job_root=job_root)
elif impl == "ref":
    from streaming import StreamingDataset
    ds = StreamingDataset(local=path, batch_size=int(batch_size), shuffle=True, shuffle_algo="py1e")
else:
    import litdata
    ds = litdata.StreamingDataset(path, shuffle=True)
sample = next(iter(ds))
harness.Consumer()(sample)
status = open("/proc/self/status").read()
hwm = int(status.split("VmHWM:")[1].split()[0])
if workload == "mixed":
    key = int(sample["id"])
else:
    key = int(sample["tokens"][0]) | int(sample["tokens"][1]) << 16
print(json.dumps({"peak_rss_mb": hwm / 1024, "key": key, "torch": "torch" in sys.modules,
                  "beyond_torch": time.perf_counter() - after_torch,
                  "shm_prefix": int(getattr(ds, "_shm_prefix_int", -1))}), flush=True)
"""

# Cold-start variants: (implementation, whether the child imports torch first).
COLD_VARIANTS = {
    "ours": ("ours", True),
    "ref": ("ref", True),
    "litdata": ("litdata", True),
    "ours-no-torch": ("ours", False),
}


# ----------------------------------------------------------------------------- parent side


class Bench(harness.Bench):
    """The harness's Bench (template processes, results, medians), serving this script."""

    common: dict[str, Any]  # the loader's settings, in every spec that builds one (set by run_all)

    def run(self, key: tuple, spec: dict[str, Any]) -> dict[str, Any] | None:
        """One measurement; its result (or None after an error)."""
        spec = dict(spec, timeout=self.args.timeout, seed=self.args.seed, job_root=str(self.work / "jobs"))
        return self.measure(key, spec["impl"], spec)

    def cold_start(self, key: tuple, variant: str, path: Path, workload: str) -> None:
        """A new interpreter: time from Popen to the line it prints after its first sample."""
        if key in self.errors:
            return
        impl, with_torch = COLD_VARIANTS[variant]
        before = set(os.listdir("/dev/shm"))
        argv = [sys.executable, "-c", COLD_CHILD, impl, str(path), str(self.args.batch_size), str(self.work / "jobs")]
        argv += [workload, str(int(with_torch)), str(HERE)]
        with open(self.work / "cold.log", "a") as log:
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=self.env, cwd=self.work)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            seconds = time.perf_counter() - t0
            try:
                proc.wait(timeout=self.args.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        answer = (
            {"ok": True, "result": dict(json.loads(line), seconds=seconds)}
            if line.strip()
            else {"ok": False, "error": f"exit status {proc.returncode} (see cold.log)"}
        )
        self.record(key, answer, before)


def write_data(bench: Bench, workload: str, n: int) -> dict[str, Path]:
    """The MDS copy (read by ours and the reference) and litdata's own copy of the same samples.

    The MDS shards of 'tiny' (up to 10M samples) are written by mds_core's writer, whose uncompressed
    output is byte-identical to the reference writer's (tests/test_golden.py), because the reference
    writer needs over ten minutes for 10M samples; the other workloads use the reference writer.
    """
    mds_writer = "ours" if workload == "tiny" else "ref"
    dirs = {}
    for writer in (mds_writer, "litdata"):
        out = bench.work / f"data-{workload}-{n}-{writer}"
        print(f"[write] {workload} n={n} {writer}", file=sys.stderr)
        bench.run(
            ("write", workload, n, writer),
            dict(op="write", impl=writer, workload=workload, n=n, dir=str(out), size_limit=bench.args.size_limit),
        )
        dirs[writer] = out
    return {"ours": dirs[mds_writer], "ref": dirs[mds_writer], "litdata": dirs["litdata"]}


def resume_spec(bench: Bench, op: str, impl: str, n: int, data: Path) -> dict[str, Any]:
    """A resume measurement (or its setup) of ``impl`` on the ``tiny`` data set of ``n`` samples at ``data``."""
    state_file = bench.work / f"state-{impl}-{n}.pkl"
    return dict(bench.common, op=op, impl=impl, workload="tiny", n=n, dir=str(data), state_file=str(state_file))


def run_all(bench: Bench) -> dict[str, Any]:
    args = bench.args
    info: dict[str, Any] = {"throughput": {}, "resume": {}}
    common = bench.common = dict(batch_size=args.batch_size, workers=args.workers)

    # 1-3 on each workload
    for workload, n in (("mixed", args.mixed), ("tokens", args.tokens)):
        if n <= 0:
            continue
        dirs = write_data(bench, workload, n)
        info["throughput"][workload] = n
        print(f"[{workload}] iterate / loader / cold start", file=sys.stderr)
        for _rep in range(args.reps):
            bench.run(("consumer", workload), dict(common, op="consumer", impl="base", workload=workload, n=n))
            for impl in IMPLS:
                for op in ("iterate", "loader"):
                    bench.run(
                        (op, workload, impl),
                        dict(common, op=op, impl=impl, workload=workload, n=n, dir=str(dirs[impl])),
                    )
            for variant, (impl, _) in COLD_VARIANTS.items():
                bench.cold_start(("cold", workload, variant), variant, dirs[impl], workload)
        for path in set(dirs.values()):
            shutil.rmtree(path, ignore_errors=True)

    # 4: resume at each size (the 'tiny' workload)
    for n in args.resume_sizes:
        dirs = write_data(bench, "tiny", n)
        print(f"[resume] n={n}", file=sys.stderr)
        expected = {}
        for impl in args.resume_impls:
            res = bench.run(("resume-setup", n, impl), resume_spec(bench, "resume-setup", impl, n, dirs[impl]))
            if res is not None:
                expected[impl] = res["expected"]
        info["resume"][n] = expected
        for _rep in range(args.reps):
            for impl in args.resume_impls:
                if impl in expected:
                    bench.run(("resume", n, impl), resume_spec(bench, "resume", impl, n, dirs[impl]))
        for path in set(dirs.values()):
            shutil.rmtree(path, ignore_errors=True)

    # 6: telemetry overhead (before 5, which is the slowest part of a full run)
    if args.telemetry_samples > 0:
        n, workload = args.telemetry_samples, args.telemetry_workload
        out = bench.work / f"data-{workload}-{n}-telemetry"
        print(f"[telemetry] {workload} n={n}", file=sys.stderr)
        bench.run(
            ("write", workload, n, "telemetry"),
            dict(op="write", impl="ours", workload=workload, n=n, dir=str(out), size_limit=args.size_limit),
        )
        info["telemetry"] = {"n": n, "workload": workload}
        for rep_number in range(args.reps):
            # Alternate which arm goes first, so a drift in machine speed does not favour one.
            arms = ("on", "off") if rep_number % 2 == 0 else ("off", "on")
            for arm in arms:
                bench.run(
                    ("telemetry", arm),
                    dict(common, op="loader", impl="ours", workload=workload, n=n, dir=str(out), telemetry=arm == "on"),
                )
        shutil.rmtree(out, ignore_errors=True)

    # 5: order generation
    if args.order_samples > 0:
        print(f"[order] n={args.order_samples:,}", file=sys.stderr)
        order = dict(op="order", n=args.order_samples, shard_samples=args.order_shard_samples, ncn=args.order_ncn)
        for _rep in range(args.reps):
            for impl in ("ours", "ref"):
                bench.run(
                    ("order", impl), dict(order, impl=impl, batch_size=args.order_batch_size, world=args.order_world)
                )
    return info


# ----------------------------------------------------------------------------- report

fmt = harness.fmt


def secs(bench: Bench, key: tuple) -> list[float]:
    return bench.all(key, "seconds")


def throughput_section(bench: Bench, info: dict[str, Any], op: str, title: str, target: float, how: str) -> list[str]:
    loader = op == "loader"
    lines = [
        f"## {title}",
        "",
        how,
        "",
        "| workload | implementation | samples/s | seconds | CPU s | peak RSS MB | Δ RSS MB "
        + ("| worker peak RSS MB " if loader else "")
        + "| ours ÷ faster other | % of consumer limit | check |",
        "|---|---|--:|--:|--:|--:|--:|" + ("--:|" if loader else "") + "---|--:|---|",
    ]
    for workload, n in info["throughput"].items():
        limit = bench.med(("consumer", workload), "seconds")
        if not loader:
            lines.append(
                f"| {workload} ({n:,}) | consumer limit (the consumer over samples in memory) "
                f"| {fmt(n / limit if limit else None)} | {fmt(limit, 3)} "
                f"| {fmt(bench.med(('consumer', workload), 'cpu_seconds'), 3)} | | | | 100% | |"
            )
        best = bench.fastest(OTHERS, lambda i: (op, workload, i))
        ref_orders = set(bench.all((op, workload, "ref"), "order"))
        for impl in IMPLS:
            key = (op, workload, impl)
            med = bench.med(key, "seconds")
            notes = bench.error_note(key)
            counts = set(bench.all(key, "count"))
            if counts:
                notes.append(
                    f"{'/'.join(map(str, sorted(counts)))} samples"
                    + ("" if all(bench.all(key, "complete")) else " (**not each once**)")
                )
            if False in bench.all(key, "all_bytes"):
                notes.append("**the consumer did not copy every payload byte**")
            if False in bench.all(key, "content_ok"):
                notes.append("**first sample has wrong content**")
            orders = set(bench.all(key, "order"))
            if impl == "ours" and orders and ref_orders:
                notes.append(
                    "same order as the reference" if orders == ref_orders else "**order differs from the reference**"
                )
            if len(orders) > 1 and impl != "litdata":
                notes.append("**order differs between reps**")
            versus = ""
            if impl == "ours" and best:
                versus = f"{best} " + harness.speedup(secs(bench, key), secs(bench, (op, workload, best)), target)
            pct = f"{100 * limit / med:.0f}%" if med and limit and not loader else ""
            lines.append(
                f"| {workload} ({n:,}) | {LABELS[impl]} | {fmt(n / med if med else None)} "
                f"| {fmt(med, 3)} | {fmt(bench.med(key, 'cpu_seconds'), 3)} "
                f"| {fmt(bench.med(key, 'peak_rss_mb'))} | {fmt(bench.med(key, 'delta_rss_mb'))} "
                + (f"| {fmt(bench.med(key, 'workers_peak_mb'))} " if loader else "")
                + f"| {versus} | {pct} | {'; '.join(notes)} |"
            )
    return lines + [""]


def cold_section(bench: Bench, info: dict[str, Any]) -> list[str]:
    lines = [
        "## 3. Cold start: new interpreter to first shuffled sample",
        "",
        "Timed: from `subprocess.Popen` of `python -c <script>` to reading the line the child "
        "prints right after `next(iter(StreamingDataset(..., shuffle=True)))` and consuming "
        "that sample: interpreter start, imports, construction, order generation and the "
        "first sample. Every library's child imports torch first, as a training script "
        "has (mds_core does not need torch; the torch-free line shows that case). Data in "
        "the page cache. Peak RSS = the child's VmHWM at that point. Target: ours (torch "
        'imported) ≤ 0.7× litdata. "Beyond torch" is the child\'s own clock from just after '
        "`import torch` to the consumed first sample (the library's import, construction and "
        "first sample); target (issue 28) ours ≤ 0.5× litdata's.",
        "",
        "| workload | implementation | seconds | beyond torch | peak RSS MB | ours ÷ litdata | "
        "beyond torch, ours ÷ litdata | ours ÷ reference | check |",
        "|---|---|--:|--:|--:|---|---|---|---|",
    ]
    labels = dict(LABELS, **{"ours-no-torch": "mds_core, torch not imported"})
    for workload in info["throughput"]:
        lit, ref = secs(bench, ("cold", workload, "litdata")), secs(bench, ("cold", workload, "ref"))
        for variant in COLD_VARIANTS:
            key = ("cold", workload, variant)
            notes = bench.error_note(key)
            ref_keys = set(bench.all(("cold", workload, "ref"), "key"))
            if variant.startswith("ours") and bench.all(key, "key") and ref_keys:
                same = set(bench.all(key, "key")) == ref_keys
                notes.append(
                    "same first sample as the reference" if same else "**first sample differs from the reference**"
                )
            mine = variant.startswith("ours")
            target = 0.7 if variant == "ours" else None
            beyond = bench.all(key, "beyond_torch") if COLD_VARIANTS[variant][1] else []
            lit_beyond = bench.all(("cold", workload, "litdata"), "beyond_torch")
            beyond_ratio = (
                harness.ratio_cell(harness.ratio_of_medians(beyond, lit_beyond), 0.5, True)
                if variant == "ours" and beyond and lit_beyond
                else ""
            )
            lines.append(
                f"| {workload} | {labels[variant]} | {fmt(bench.med(key, 'seconds'), 3)} "
                f"| {fmt(harness.median(beyond), 3) if beyond else ''} "
                f"| {fmt(bench.med(key, 'peak_rss_mb'))} "
                f"| {harness.ratio_cell(harness.ratio_of_medians(secs(bench, key), lit), target, True) if mine else ''} "
                f"| {beyond_ratio} "
                f"| {harness.ratio_cell(harness.ratio_of_medians(secs(bench, key), ref)) if mine else ''} "
                f"| {'; '.join(notes)} |"
            )
    return lines + [""]


def resume_section(bench: Bench, info: dict[str, Any]) -> list[str]:
    args = bench.args
    sizes = list(info["resume"])
    lines = [
        "## 4. Resume latency",
        "",
        f"Workload `tiny` (`ndarray:uint16:16`, 32 B samples). Setup (not timed): each "
        f"library's `StreamingDataLoader` (batch {args.batch_size}, {args.workers} workers, "
        f"shuffled) iterates half an epoch in one process, saves `loader.state_dict()` and "
        f"records the next batch. Timed, in a fresh forked process (imports done): construct "
        f"the dataset and loader + `loader.load_state_dict(state)` + `next(iter(loader))`, "
        f"consumed (worker start and the order computation included). CPU s includes the "
        f'workers, reaped after the timed section. "next batch" checks the batch against the '
        f"one the uninterrupted run yielded. Target: ours ≤ 0.7× litdata at every size.",
        "",
        "| samples | implementation | seconds | CPU s | peak RSS MB | Δ RSS MB | worker peak RSS MB "
        "| ours ÷ litdata | ours ÷ reference | check |",
        "|--:|---|--:|--:|--:|--:|--:|---|---|---|",
    ]
    for n in sizes:
        lit, ref = secs(bench, ("resume", n, "litdata")), secs(bench, ("resume", n, "ref"))
        for impl in IMPLS:
            key = ("resume", n, impl)
            notes = bench.error_note(key) + bench.error_note(("resume-setup", n, impl))
            want = info["resume"][n].get(impl)
            got = bench.all(key, "batch")
            if want is not None and got:
                notes.append(
                    "next batch correct"
                    if all(b == want for b in got)
                    else "**resumed batch differs from the uninterrupted run**"
                )
            mine = impl == "ours"
            lines.append(
                f"| {n:,} | {LABELS[impl]} | {fmt(bench.med(key, 'seconds'), 3)} "
                f"| {fmt(bench.med(key, 'cpu_seconds'), 3)} "
                f"| {fmt(bench.med(key, 'peak_rss_mb'))} | {fmt(bench.med(key, 'delta_rss_mb'))} "
                f"| {fmt(bench.med(key, 'workers_peak_mb'))} "
                f"| {harness.ratio_cell(harness.ratio_of_medians(secs(bench, key), lit), 0.7, True) if mine else ''} "
                f"| {harness.ratio_cell(harness.ratio_of_medians(secs(bench, key), ref)) if mine else ''} "
                f"| {'; '.join(notes)} |"
            )
    return lines + [""]


def order_section(bench: Bench) -> list[str]:
    args = bench.args
    nodes, ranks, workers = args.order_world
    n = args.order_samples
    lines = [
        "## 5. Epoch order generation",
        "",
        f"{n:,} samples in shards of {args.order_shard_samples:,}, one stream, py1e, "
        f"{args.order_ncn} canonical nodes, batch {args.order_batch_size}, world {nodes} node × "
        f"{ranks} ranks × {workers} workers, epoch 0 from sample 0. Timed: ours = "
        "`generate_work(OrderSpec(...), ...)`; reference = `streaming.base.batching."
        "generate_work('random', stand_in, World(...), 0, 0)`, the reference's own "
        "`resample_streams` → `get_partitions` → `get_shuffle` → index mapping, on a stand-in "
        "object holding the attributes its StreamingDataset would have (its real path then "
        "also copies the result into shared memory: not timed here). Δ RSS = VmHWM during the "
        "call minus RSS before it. Targets: ours no slower, ≤ 60% of the reference's peak "
        "memory.",
        "",
        "| implementation | seconds | CPU s | samples/s | peak RSS MB | Δ RSS MB | time ÷ ref "
        "| peak RSS ÷ ref | check |",
        "|---|--:|--:|--:|--:|--:|---|---|---|",
    ]
    for impl in ("ours", "ref"):
        key = ("order", impl)
        med = bench.med(key, "seconds")
        notes = bench.error_note(key)
        shapes = {tuple(x) for x in bench.all(key, "shape")}
        if shapes:
            valid = "/".join(f"{v:,}" for v in sorted(set(bench.all(key, "valid"))))
            notes.append("shape " + ", ".join("×".join(map(str, x)) for x in shapes) + f"; {valid} ids")
        if impl == "ours" and bench.all(key, "order") and bench.all(("order", "ref"), "order"):
            same = set(bench.all(key, "order")) == set(bench.all(("order", "ref"), "order"))
            notes.append("identical to the reference's array" if same else "**differs from the reference's array**")
        mine = impl == "ours"

        def versus(field: str, target: float, key: tuple = key) -> str:
            got = harness.ratio_of_medians(bench.all(key, field), bench.all(("order", "ref"), field))
            return harness.ratio_cell(got, target, True)

        lines.append(
            f"| {LABELS[impl]} | {fmt(med, 2)} | {fmt(bench.med(key, 'cpu_seconds'), 2)} "
            f"| {fmt(n / med if med else None)} | {fmt(bench.med(key, 'peak_rss_mb'))} "
            f"| {fmt(bench.med(key, 'delta_rss_mb'))} "
            f"| {versus('seconds', 1.0) if mine else ''} | {versus('peak_rss_mb', 0.6) if mine else ''} "
            f"| {'; '.join(notes)} |"
        )
    return lines + [""]


def telemetry_section(bench: Bench, info: dict[str, Any]) -> list[str]:
    args = bench.args
    n, workload = info["telemetry"]["n"], info["telemetry"]["workload"]
    lines = [
        "## 6. Telemetry overhead",
        "",
        f"Workload `{workload}`, {n:,} samples; mds_core only. Timed as in section 2: construct "
        f"the dataset and `StreamingDataLoader` ({args.workers} workers, batch {args.batch_size}, "
        "shuffled py1e) + one epoch of consumed batches, with `StreamingDataset(telemetry=True)` "
        "(the default: per-worker counters in memory-mapped files, timed per decode block of 256 "
        "samples) and `telemetry=False`. Reps interleaved, the first arm alternating. The "
        "loader's own per-batch wait timing runs in both arms. Overhead = median(on) ÷ "
        "median(off) − 1, with the smallest and largest per-rep figure.",
        "",
        "| telemetry | seconds | CPU s | samples/s | samples counted | check |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for arm in ("on", "off"):
        key = ("telemetry", arm)
        med = bench.med(key, "seconds")
        notes = bench.error_note(key)
        if bench.all(key, "count") and not all(bench.all(key, "complete")):
            notes.append("**not every sample once**")
        counted = sorted(set(bench.all(key, "telemetry_samples")))
        lines.append(
            f"| {arm} | {fmt(med, 3)} | {fmt(bench.med(key, 'cpu_seconds'), 3)} "
            f"| {fmt(n / med if med else None)} | {'/'.join(f'{c:,}' for c in counted)} "
            f"| {'; '.join(notes)} |"
        )
    lines.append("")
    for field, what in (("seconds", "wall time"), ("cpu_seconds", "CPU time")):
        got = harness.ratio_of_medians(bench.all(("telemetry", "on"), field), bench.all(("telemetry", "off"), field))
        if got is not None:
            mid, lo, hi = (100 * (x - 1) for x in got)
            lines.append(f"- overhead in {what}: **{mid:+.1f}%** [{lo:+.1f}% – {hi:+.1f}%]")
    return lines + [""]


def report(bench: Bench, info: dict[str, Any], wall: float) -> str:
    args = bench.args
    lines = harness.header(
        "Streaming benchmark: mds_core vs mosaicml-streaming vs litdata",
        wall,
        f"reps={args.reps} (median shown), batch size {args.batch_size}, {args.workers} DataLoader "
        f"workers, size_limit={args.size_limit:,} B (litdata chunk_bytes too), seed={args.seed}",
    )
    lines += [
        "How to read it:",
        "- One data set per workload, written once by `streaming.MDSWriter` (read by mds_core and "
        "the reference) and once by litdata's `BinaryWriter` (read by litdata); warm page cache.",
        "- Workloads: `mixed` = int64 `id`, int32 `label`, ~200 B `str`, ~8 KiB `bytes`, "
        "`ndarray:float32:64`; `tokens` = `ndarray:uint16:2048`; `tiny` = `ndarray:uint16:16`.",
        '- Shuffled everywhere: mds_core and the reference `shuffle=True, shuffle_algo="py1e"`, '
        "default seed and canonical nodes (1); litdata `shuffle=True`.",
        "- Every sample or batch goes through the same consumer (`benchmarks/harness.py`): it "
        "copies every array, bytes and str payload into a preallocated buffer, as a collate into a "
        "batch buffer does; each run checks it copied every payload byte. The consumer limit is "
        "that consumer over the same samples already in memory.",
        "- CPU s = user + system CPU seconds of the measuring process (all threads) and of its "
        "reaped children (DataLoader workers) during the timed section.",
        "- Ratios: ratio of median times (ours ÷ theirs for latencies; theirs ÷ ours, i.e. how many "
        "times faster, for throughput), with the smallest and largest per-rep ratio in brackets "
        "(reps interleaved), against the issue-15 target.",
        "- Except for the cold start, each rep runs in a fresh process forked from a template "
        "that has imported torch and that library's dataset and loader (not timed). peak RSS = VmHWM of that process, reset "
        "at the start of the timed section; Δ RSS = peak minus RSS at the start; worker peak RSS = "
        "the largest DataLoader worker's peak (ru_maxrss, includes what it inherited at fork).",
        "- Checks (not timed): every sample once, mds_core's order equal to the reference's, "
        "first sample's content, resumed batch = the uninterrupted run's next batch.",
        "",
    ]
    if info["throughput"]:
        lines += throughput_section(
            bench,
            info,
            "iterate",
            "1. Shuffled single-process iteration",
            2.0,
            "Timed: construct the dataset + `for sample in dataset` over one epoch in the main "
            "process, each sample consumed (reference: its prepare/ready threads run). Targets: "
            "ours ≥ 2× the faster of the reference and litdata, and ≥ 50% of the consumer limit.",
        )
        lines += throughput_section(
            bench,
            info,
            "loader",
            f"2. StreamingDataLoader, {args.workers} workers, batch size {args.batch_size}, one epoch",
            3.0,
            "Timed: construct the dataset + the library's `StreamingDataLoader` (every library with "
            "the same collate, `common_collate`: torch's `default_collate` after turning litdata's "
            "`memoryview` values into `bytes`) + every batch of one epoch, consumed "
            "in the main process (worker start and shutdown included). Target: ours ≥ 3× the "
            "faster other.",
        )
        lines += cold_section(bench, info)
    if info["resume"]:
        lines += resume_section(bench, info)
    if args.order_samples > 0:
        lines += order_section(bench)
    if info.get("telemetry"):
        lines += telemetry_section(bench, info)
    return "\n".join(lines)


def own_shm_leftovers(before: set[str]) -> list[str]:
    return sorted(set(os.listdir("/dev/shm")) - before) if os.path.isdir("/dev/shm") else []


def main(argv: list[str] | None = None) -> int:
    parser = harness.option_parser(
        __doc__,
        [
            ("--mixed", 20_000, 'samples in "mixed" for iteration/loader/cold start (0: skip)'),
            ("--tokens", 20_000, 'samples in "tokens" for iteration/loader/cold start (0: skip)'),
            (
                "--resume-sizes",
                None,
                'comma list of "tiny" dataset sizes for resume latency, smallest first '
                '(default 50000,10000000; --quick 5000,20000; "": skip)',
            ),
            (
                "--resume-impls",
                "ours,litdata",
                "implementations measured for resume latency (default ours,litdata: the reference needs over "
                "12 minutes to set up at 10M samples; add ref to measure it too)",
            ),
            ("--order-samples", 100_000_000, "samples in the order-generation epoch (0: skip)"),
            ("--order-shard-samples", 50_000, None),
            ("--order-ncn", 8, "canonical nodes for ordering"),
            ("--order-batch-size", 32, None),
            ("--order-world", "1,8,8", "nodes,ranks per node,workers per rank for ordering"),
            ("--telemetry-samples", 1_000_000, "samples for the telemetry-overhead epochs (0: skip)"),
            ("--reps", 3, "repetitions of each measurement"),
            ("--batch-size", 256, None),
            ("--workers", 2, "DataLoader workers"),
            ("--size-limit", 1 << 26, "shard size limit in bytes (MDS size_limit, litdata chunk_bytes)"),
            ("--seed", 0, None),
            ("--timeout", 1800, "seconds after which one measurement is killed"),
            ("--quick", False, "smoke run: 600 mixed/tokens, resume at 5k and 20k, 2M order, 100k telemetry, 1 rep"),
            ("--out", str(HERE / "results-streaming-latest.md"), "markdown output file"),
        ],
    )
    parser.add_argument(
        "--telemetry-workload",
        default="tiny",
        choices=sorted(WORKLOAD_COLUMNS),
        help="workload of the telemetry-overhead epochs (default tiny: the most blocks per second, so the worst case)",
    )
    args = parser.parse_args(argv)

    if args._serve:
        family = args._serve
        harness.serve(lambda: import_family(family), measure)
        return 0

    if args.quick:
        args.mixed, args.tokens, args.reps = min(args.mixed, 600), min(args.tokens, 600), 1
        if args.resume_sizes is None:
            args.resume_sizes = "5000,20000"
        args.order_samples = min(args.order_samples, 2_000_000)
        args.telemetry_samples = min(args.telemetry_samples, 100_000)
    if args.resume_sizes is None:
        args.resume_sizes = "50000,10000000"
    args.resume_sizes = [int(x) for x in args.resume_sizes.split(",") if x.strip()]
    args.resume_impls = [x for x in args.resume_impls.split(",") if x.strip()]
    args.order_world = tuple(int(x) for x in args.order_world.split(","))

    t0 = time.perf_counter()
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    with tempfile.TemporaryDirectory(prefix="mds-bench-streaming-") as tmp:
        bench = Bench(args, Path(tmp), Path(__file__).resolve())
        try:
            info = run_all(bench)
        finally:
            bench.close()
        leftovers = own_shm_leftovers(shm_before)
    if leftovers:  # not removed: they may be another process's (ours are unlinked per rep)
        print(f"NOTE: new /dev/shm entries since the start: {leftovers[:10]}", file=sys.stderr)
    text = report(bench, info, time.perf_counter() - t0)
    harness.write_report(text, args.out)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
