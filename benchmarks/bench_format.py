#!/usr/bin/env python3
"""Side-by-side benchmark of the format: mds_core vs the reference (mosaicml-streaming) vs litdata.

One run measures, on the same generated samples:

* writers: ``mds_core.MDSWriter``, ``streaming.MDSWriter`` and litdata's
  ``litdata.streaming.writer.BinaryWriter`` (what ``litdata.optimize`` runs inside each of its
  worker processes, minus the worker pool), each uncompressed and with ``compression="zstd"``;
* readers, random access (one fixed permutation of all indices) and in-order iteration:
  ``mds_core.LocalDataset``, ``streaming.LocalDataset`` (the reference's like-for-like reader),
  ``streaming.StreamingDataset`` (second reference line) and ``litdata.StreamingDataset``. The MDS
  readers read the shards written by the reference writer; litdata reads its own chunks;
* every read loop hands each sample to the same ``harness.Consumer``, which copies every array,
  bytes and str payload into a preallocated buffer, and the run checks that it copied every
  payload byte; the "consumer limit" is that consumer over the same samples already in memory;
* the page-cache read rate of the uncompressed shard files (large ``readinto`` of every file,
  warm).

Every measurement runs in its own fresh process, forked from a template process per library
(which has only imported that library), ``--reps`` times, interleaved; wall and CPU seconds and
peak RSS are taken by ``harness.Span``. Run with the benchmark venv::

    bash benchmarks/setup_env.sh
    benchmarks/.venv/bin/python benchmarks/bench_format.py --mixed 20000 --tokens 20000   # full
    benchmarks/.venv/bin/python benchmarks/bench_format.py --quick                         # smoke
"""

from __future__ import annotations

import os
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness

WORKLOAD_COLUMNS: dict[str, dict[str, str]] = {
    "mixed": {"id": "int", "label": "int32", "text": "str", "image": "bytes", "emb": "ndarray:float32:64"},
    "tokens": {"tokens": "ndarray:uint16:2048"},
}
WRITERS = ["ours", "ref", "litdata"]
# 'ref' = streaming.StreamingDataset; 'ours-views' = random access returning read-only views (no copy)
READERS = ["ours", "ours-views", "ref", "ref-local", "litdata"]
OURS = ("ours", "ours-views")


def readers_for(mode: str) -> list[str]:
    """The readers a mode measures: read-only views change random access only."""
    return READERS if mode == "random" else [r for r in READERS if r != "ours-views"]


COMPRESSIONS: list[str | None] = [None, "zstd"]
MODES = ["random", "in-order"]
LABELS = {
    ("write", "ours"): "mds_core.MDSWriter",
    ("write", "ref"): "streaming.MDSWriter",
    ("write", "litdata"): "litdata BinaryWriter",
    ("read", "ours"): "mds_core.LocalDataset",
    ("read", "ours-views"): "mds_core.LocalDataset(writable=False)",
    ("read", "ref"): "streaming.StreamingDataset",
    ("read", "ref-local"): "streaming.LocalDataset",
    ("read", "litdata"): "litdata.StreamingDataset",
}
# Which template process (and so which imports) serves an implementation.
FAMILY = {"ours": "ours", "ours-views": "ours", "ref": "ref", "ref-local": "ref", "litdata": "litdata"}


# ----------------------------------------------------------------------------- data


def make_samples(workload: str, n: int, seed: int) -> list[dict[str, Any]]:
    """Deterministic samples: the same (workload, n, seed) gives the same data in any process."""
    rng = np.random.default_rng(seed)
    if workload == "tokens":
        tokens = rng.integers(0, 50257, size=(n, 2048), dtype=np.uint16)
        return [{"tokens": tokens[i].copy()} for i in range(n)]
    alphabet = np.frombuffer((string.ascii_letters + string.digits + " ").encode(), np.uint8)
    text_lens = rng.integers(150, 251, size=n)  # ~200 B of ascii
    image_lens = rng.integers(6 << 10, (10 << 10) + 1, size=n)  # ~8 KiB of random bytes
    text_blob = alphabet[rng.integers(0, len(alphabet), size=int(text_lens.sum()), dtype=np.uint8)].tobytes()
    image_size = int(image_lens.sum())
    image_blob = rng.bit_generator.random_raw((image_size + 7) // 8).tobytes()[:image_size]
    labels = rng.integers(0, 1000, size=n)
    emb = rng.standard_normal(size=(n, 64), dtype=np.float32)
    samples = []
    t_at = i_at = 0
    for i in range(n):
        t_end, i_end = t_at + int(text_lens[i]), i_at + int(image_lens[i])
        samples.append(
            {
                "id": i,
                "label": int(labels[i]),
                "text": text_blob[t_at:t_end].decode("ascii"),
                "image": image_blob[i_at:i_end],
                "emb": emb[i].copy(),
            }
        )
        t_at, i_at = t_end, i_end
    return samples


def payload_bytes(workload: str, n: int, seed: int) -> int:
    """Raw sample payload: the bytes of every field's value (ints at their encoded width)."""
    if workload == "tokens":
        return n * 2048 * 2
    rng = np.random.default_rng(seed)  # replays make_samples' first draws
    text_lens = rng.integers(150, 251, size=n)
    image_lens = rng.integers(6 << 10, (10 << 10) + 1, size=n)
    return int(n * (8 + 4 + 64 * 4) + text_lens.sum() + image_lens.sum())


def same_sample(got: Any, want: dict[str, Any]) -> bool:
    for key, value in want.items():
        other = got[key]
        if isinstance(value, np.ndarray):
            if not np.array_equal(np.asarray(other), value):
                return False
        elif isinstance(value, bytes):
            if bytes(other) != value:
                return False
        elif isinstance(value, int):
            if int(other) != value:
                return False
        elif other != value:
            return False
    return True


def dir_bytes(path: Path) -> int:
    """Bytes of every file of a written dataset except its index."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name != "index.json")


def shard_files(path: Path) -> list[Path]:
    """The uncompressed shard/chunk files of a written dataset (not its index)."""
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".mds", ".bin"))


def consumed_bytes(workload: str, n: int, seed: int) -> int:
    """What the consumer must copy for n samples: the payload minus the unpacked integers."""
    return payload_bytes(workload, n, seed) - (n * 12 if workload == "mixed" else 0)


# ----------------------------------------------------------------------------- measured code


def writer_for(impl: str) -> Callable[..., None]:
    """``write(out, columns, samples, size_limit, **options)`` by ``impl``'s writer, imported now (not when timed).

    ``options`` (``compression``, ``hashes``) go to the writer only when given, so each caller's writer runs
    with exactly the settings it names; litdata's ``BinaryWriter`` takes ``compression`` alone.
    """
    if impl == "litdata":
        from litdata.streaming.writer import BinaryWriter

        def write_chunks(out: str, columns: Any, samples: Iterable[Any], size_limit: int, **options: Any) -> None:
            options.pop("hashes", None)
            writer = BinaryWriter(out, chunk_bytes=size_limit, **options)
            for index, sample in enumerate(samples):
                writer.add_item(index, sample)
            writer.done()
            writer.merge()

        return write_chunks
    writer_class: Any
    if impl == "ours":
        import mds_core

        writer_class = mds_core.MDSWriter
    else:
        import streaming

        writer_class = streaming.MDSWriter

    def write_shards(out: str, columns: Any, samples: Iterable[Any], size_limit: int, **options: Any) -> None:
        with writer_class(out=out, columns=columns, size_limit=size_limit, **options) as writer:
            for sample in samples:
                writer.write(sample)

    return write_shards


def make_writer(spec: dict[str, Any], samples: list[dict[str, Any]]) -> Callable[[], None]:
    write = writer_for(spec["impl"])
    options = dict(compression=spec["compression"], hashes=spec["hashes"])
    return lambda: write(spec["dir"], WORKLOAD_COLUMNS[spec["workload"]], samples, spec["size_limit"], **options)


def open_reader(impl: str, path: str, batch_size: int, mode: str) -> Any:
    if impl in OURS:
        from mds_core import LocalDataset

        return LocalDataset(local=path, writable=impl == "ours")
    if impl == "ref":
        from streaming import StreamingDataset

        return StreamingDataset(local=path, batch_size=batch_size)
    if impl == "ref-local":
        from streaming import LocalDataset as RefLocalDataset

        return RefLocalDataset(local=path)
    import litdata

    if mode == "random":
        # litdata's default batch_decode='auto' decodes a window of up to 256 rows per miss
        # (tuned for iteration); with random indices every access misses: per-item decode.
        return litdata.StreamingDataset(path, batch_decode=0)
    return litdata.StreamingDataset(path)


def iterate(impl: str, ds: Any) -> Iterator[dict[str, Any]]:
    if impl == "ref-local":  # map-style only: no __iter__, walk the indices
        return (ds[i] for i in range(len(ds)))
    return iter(ds)


def pagecache_read(files: list[Path]) -> tuple[float, float, int]:
    """Wall and CPU seconds of one pass of large reads over warm files, and the bytes read."""
    sizes = [f.stat().st_size for f in files]
    view = memoryview(bytearray(max(sizes)))

    def read_all() -> None:
        for f, size in zip(files, sizes, strict=True):
            with open(f, "rb", buffering=0) as fh:
                got = 0
                while got < size:
                    got += fh.readinto(view[got:size]) or size

    read_all()  # warm
    passes, cpu0, t0 = 0, time.process_time(), time.perf_counter()
    while True:  # whole passes for >= 0.3 s, so the rate is not timer noise
        read_all()
        passes += 1
        seconds = time.perf_counter() - t0
        if seconds >= 0.3:
            return seconds / passes, (time.process_time() - cpu0) / passes, sum(sizes)


def import_family(family: str) -> None:
    """Import what a family's measurements use (so that no timed section imports)."""
    if family == "ours":
        from mds_core import LocalDataset, MDSWriter  # noqa: F401
    elif family == "ref":
        import streaming  # noqa: F401
    elif family == "litdata":
        import litdata  # noqa: F401
        from litdata.streaming.writer import BinaryWriter  # noqa: F401


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement; runs in a fresh (forked) process."""
    op, impl, n, workload = spec["op"], spec["impl"], spec["n"], spec["workload"]
    if op == "pagecache":
        seconds, cpu, size = pagecache_read(shard_files(Path(spec["dir"])))
        return dict(seconds=seconds, cpu_seconds=cpu, bytes=size)
    if op == "consumer":
        return harness.consumer_limit(make_samples(workload, n, spec["seed"]))
    if op == "write":
        work = make_writer(spec, make_samples(workload, n, spec["seed"]))
        os.sync()  # the previous measurement's dirty pages must not be written back during this one
        with harness.Span() as span:  # construct + write every sample + finish
            work()
        return dict(span.result(), bytes=dir_bytes(Path(spec["dir"])))

    order = np.random.default_rng(spec["seed"] + 1).permutation(n).tolist()
    consume = harness.Consumer()
    os.sync()
    count, first, last = 0, None, None
    with harness.Span() as span:  # open the dataset + read and consume every sample once
        ds = open_reader(impl, spec["dir"], spec["batch_size"], spec["mode"])
        if spec["mode"] == "random":
            for i in order:
                last = ds[i]
                consume(last)
            count = len(order)
        else:
            for last in iterate(impl, ds):
                consume(last)
                if first is None:
                    first = last
                count += 1
    # not timed: did the reader return the right data, and did the consumer read all of it?
    samples = make_samples(workload, n, spec["seed"])
    ok = count == n and len(ds) == n
    if spec["mode"] == "in-order":
        ok = ok and same_sample(first, samples[0]) and same_sample(last, samples[-1])
    else:
        ok = ok and same_sample(last, samples[order[-1]])
    result = dict(
        span.result(),
        consumed=consume.consumed,
        verified=bool(ok and all(same_sample(ds[i], samples[i]) for i in order[:32])),
    )
    if impl == "ref":
        result["shm_prefix"] = int(getattr(ds, "_shm_prefix_int", -1))
    return result


# ----------------------------------------------------------------------------- parent side


def compare_shards(ours: Path, ref: Path) -> str:
    """How mds_core's shard files compare with the reference writer's (index.json aside)."""
    names = sorted(p.name for p in ref.iterdir() if p.name != "index.json")
    if names != sorted(p.name for p in ours.iterdir() if p.name != "index.json"):
        return "**shard file names differ from ref**"
    if all((ours / nm).read_bytes() == (ref / nm).read_bytes() for nm in names):
        return "shards byte-identical to ref"
    if all(nm.endswith(".zstd") for nm in names):
        import io

        import zstandard

        def unzstd(path: Path) -> bytes:  # all frames (a writer may emit several)
            return (
                zstandard.ZstdDecompressor()
                .stream_reader(io.BytesIO(path.read_bytes()), read_across_frames=True)
                .read()
            )

        if all(unzstd(ours / nm) == unzstd(ref / nm) for nm in names):
            return "zstd bytes differ from ref; decompressed shards identical"
    return "**shards differ from ref**"


def run_workload(bench: harness.Bench, workload: str, n: int) -> dict[str, Any]:
    """Consumer limit, writes, page-cache reads and reads for one workload; reps interleaved."""
    args, base = bench.args, bench.work / workload
    base.mkdir()
    common = dict(
        workload=workload,
        n=n,
        seed=args.seed,
        hashes=args.hashes,
        size_limit=args.size_limit,
        batch_size=args.batch_size,
    )

    def data_dir(writer: str, comp: str | None) -> Path:
        return base / f"data-{writer}-{comp or 'none'}"

    print(f"[{workload}] n={n}: consumer limit, writers", file=sys.stderr)
    for rep in range(args.reps):
        bench.measure((workload, "consumer"), "base", dict(common, op="consumer", impl="base"))
        for comp in COMPRESSIONS:
            for writer in WRITERS:
                out = data_dir(writer, comp) if rep == 0 else base / "scratch-write"
                bench.measure(
                    (workload, "write", writer, comp),
                    FAMILY[writer],
                    dict(common, op="write", impl=writer, compression=comp, dir=str(out)),
                )
                if rep > 0:
                    shutil.rmtree(out, ignore_errors=True)

    shards = {
        comp: compare_shards(data_dir("ours", comp), data_dir("ref", comp))
        for comp in COMPRESSIONS
        if data_dir("ours", comp).is_dir() and data_dir("ref", comp).is_dir()
    }

    print(f"[{workload}] page cache + readers", file=sys.stderr)
    scratch = base / "scratch-read"
    for _rep in range(args.reps):
        for writer in ("ref", "litdata"):
            if data_dir(writer, None).is_dir():
                bench.measure(
                    (workload, "pagecache", writer),
                    "base",
                    dict(common, op="pagecache", impl=writer, dir=str(data_dir(writer, None))),
                )
        for comp in COMPRESSIONS:
            for reader in READERS:
                src = data_dir("litdata" if reader == "litdata" else "ref", comp)
                if not src.is_dir() or (reader == "ref-local" and comp is not None):
                    continue  # (streaming.LocalDataset never decompresses: nothing to measure)
                for mode in [m for m in MODES if reader in readers_for(m)]:
                    # Fresh copy per measurement: the reference decompresses shards next to
                    # the .zstd files, which must not leak into the next measurement.
                    shutil.copytree(src, scratch)
                    bench.measure(
                        (workload, "read", reader, comp, mode),
                        FAMILY[reader],
                        dict(common, op="read", impl=reader, compression=comp, mode=mode, dir=str(scratch)),
                    )
                    shutil.rmtree(scratch, ignore_errors=True)
    info = {
        "shards": shards,
        "uncompressed_bytes": {
            w: dir_bytes(data_dir(w, None)) for w in ("ref", "litdata") if data_dir(w, None).is_dir()
        },
    }
    shutil.rmtree(base, ignore_errors=True)  # free the disk early
    return info


# ----------------------------------------------------------------------------- report

# Targets (issue 15): writes ≥ 2× the reference; random access ≥ 5× streaming.LocalDataset;
# in-order iteration ≥ 2× the better peer and ≥ 50% of the consumer limit.
WRITE_TARGET, RANDOM_TARGET, IN_ORDER_TARGET, LIMIT_TARGET = 2.0, 5.0, 2.0, 0.5


# What a reader row says about how the reader was driven, by (reader, mode).
READ_NOTES = {
    ("ref-local", "in-order"): "ds[i] for i in range(len(ds)) (map-style only)",
    ("ref", "in-order"): "single-process `for s in ds` (its prepare/ready threads run)",
    ("litdata", "random"): "batch_decode=0 (per-item decode)",
}


def workload_table(bench: harness.Bench, workload: str, n: int, info: dict[str, Any]) -> list[str]:
    fmt, seed = harness.fmt, bench.args.seed
    payload_mb = payload_bytes(workload, n, seed) / 1e6
    want_consumed = consumed_bytes(workload, n, seed)
    limit = bench.med((workload, "consumer"), "seconds")
    lines = [
        f"### `{workload}`: {n:,} samples, {payload_mb:,.1f} MB of raw payload",
        "",
        "| operation | implementation | compression | samples/s | payload MB/s | seconds | CPU s "
        "| shard MB | peak RSS MB | Δ RSS MB | ours vs | % of consumer limit | % of page cache "
        "| note |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|---|",
    ]

    def secs(key: tuple) -> list[float]:
        return bench.all(key, "seconds")

    def row(
        op: str, impl: str, key: tuple, comp: str | None, versus: str, pct_limit: bool, pc_writer: str | None, note: str
    ) -> None:
        med = bench.med(key, "seconds")
        notes = ([note] if note else []) + bench.error_note(key)
        if any(r.get("verified") is False for r in bench.results.get(key, [])):
            notes.append("**returned wrong data**")
        consumed = set(bench.all(key, "consumed"))
        if consumed and consumed != {want_consumed}:
            notes.append(f"**consumer copied {sorted(consumed)} bytes, not {want_consumed}**")
        pc = bench.med((workload, "pagecache", pc_writer), "seconds") if pc_writer else None
        shard_mb = bench.med(key, "bytes") if op == "write" else None
        lines.append(
            f"| {op} | {LABELS[(op.split()[0], impl)]} | {comp or 'none'} "
            f"| {fmt(n / med if med else None)} | {fmt(payload_mb / med if med else None, 1)} "
            f"| {fmt(med, 3)} | {fmt(bench.med(key, 'cpu_seconds'), 3)} "
            f"| {fmt(shard_mb / 1e6 if shard_mb else None, 1)} | {fmt(bench.med(key, 'peak_rss_mb'))} "
            f"| {fmt(bench.med(key, 'delta_rss_mb'))} | {versus} "
            f"| {f'{100 * limit / med:.0f}%' if pct_limit and med and limit else ''} "
            f"| {f'{100 * pc / med:.0f}%' if pc and med else ''} | {'; '.join(notes)} |"
        )

    lines.append(
        f"| consumer limit | `harness.Consumer` over samples in memory | — | {fmt(n / limit if limit else None)} "
        f"| {fmt(payload_mb / limit if limit else None, 1)} | {fmt(limit, 3)} "
        f"| {fmt(bench.med((workload, 'consumer'), 'cpu_seconds'), 3)} | — | — | — | — | 100% | | "
        f"copies {want_consumed / 1e6:,.1f} MB |"
    )
    key: tuple[str | None, ...]  # (workload, operation, implementation, ...): a Bench result key
    for writer in ("ref", "litdata"):
        key = (workload, "pagecache", writer)
        med, size = bench.med(key, "seconds"), info["uncompressed_bytes"].get(writer)
        lines.append(
            f"| page-cache read | {'MDS' if writer == 'ref' else 'litdata'} shard files | none "
            f"| {fmt(n / med if med else None)} "
            f"| {fmt(size / 1e6 / med if med and size else None, 1)} (shard bytes) | {fmt(med, 3)} "
            f"| {fmt(bench.med(key, 'cpu_seconds'), 3)} | {fmt(size / 1e6 if size else None, 1)} "
            f"| — | — | — | | 100% | large readinto of every file, warm |"
        )
    for comp in COMPRESSIONS:
        for writer in WRITERS:
            key = (workload, "write", writer, comp)
            versus = ""
            if writer == "ours":
                versus = "ref " + harness.speedup(secs(key), secs((workload, "write", "ref", comp)), WRITE_TARGET)
            note = info["shards"].get(comp, "") if writer == "ours" else ""
            row("write", writer, key, comp, versus, False, None, note)
    for mode in MODES:
        for comp in COMPRESSIONS:
            fastest = bench.fastest([r for r in READERS if r not in OURS], lambda p: (workload, "read", p, comp, mode))
            for reader in readers_for(mode):
                key = (workload, "read", reader, comp, mode)
                versus = ""
                if reader in OURS and mode == "random":
                    versus = "; ".join(
                        f"{p} "
                        + harness.speedup(
                            secs(key),
                            secs((workload, "read", p, comp, mode)),
                            RANDOM_TARGET if p == "ref-local" else None,
                        )
                        for p in ("ref-local", "ref")
                        if secs((workload, "read", p, comp, mode))
                    )
                elif reader == "ours" and fastest:
                    versus = f"{fastest} " + harness.speedup(
                        secs(key), secs((workload, "read", fastest, comp, mode)), IN_ORDER_TARGET
                    )
                note = READ_NOTES.get((reader, mode), "")
                if reader == "ref-local" and comp is not None:
                    note = "n/a: streaming.LocalDataset does not decompress shards"
                if reader == "ref" and comp is not None:
                    note = (note + "; " if note else "") + "includes unpacking shards to disk"
                pc = ("litdata" if reader == "litdata" else "ref") if mode == "in-order" else None
                row(f"read {mode}", reader, key, comp, versus, True, pc, note)
    return lines


def report(bench: harness.Bench, sizes: dict[str, int], infos: dict[str, dict[str, Any]], wall: float) -> str:
    args = bench.args
    lines = harness.header(
        "MDS format benchmark: mds_core vs mosaicml-streaming vs litdata",
        wall,
        f"reps={args.reps} (median shown), size_limit={args.size_limit:,} B (also litdata "
        f"chunk_bytes), hashes={','.join(args.hashes) or 'none'}, reference StreamingDataset "
        f"batch_size={args.batch_size}, seed={args.seed}",
    )
    lines += [
        "How to read it:",
        "- Each cell is the median over reps; each rep ran in its own process, forked from a "
        "template process that had only imported that library. Timed: writers = construct + "
        "write every sample + finish; readers = open the dataset + read every sample once and "
        "hand it to the consumer (random: one fixed permutation of all indices, the same for "
        "every reader; in-order: iteration).",
        "- The consumer (`benchmarks/harness.py`, the same for every library) copies every array, "
        "bytes and str value of each sample into a preallocated 16 MiB buffer, as a collate into a "
        'batch buffer does; the run checks that it copied every payload byte. "% of consumer limit" '
        "= the consumer alone over the same samples already in memory ÷ the reader's time.",
        "- CPU s = user + system CPU seconds of the measuring process (all its threads) during the "
        "timed section; above the wall time means a second core was used.",
        '- "ours vs": how many times faster ours is than the named implementation: the ratio of '
        "median times, with the smallest and largest per-rep ratio in brackets (reps interleaved), "
        "and the issue-15 target. Writes: vs `streaming.MDSWriter`; random access: vs "
        "`streaming.LocalDataset` (like for like) and `streaming.StreamingDataset`; in-order: vs "
        "the fastest other reader.",
        "- Data: random ascii text and random bytes/arrays, so zstd barely compresses it. MDS "
        "readers read the reference writer's shards; litdata reads its own chunks; warm page "
        'cache. "% of page cache" = the time to read the same uncompressed shard files with large '
        "reads ÷ the reader's time.",
        "- payload MB/s counts raw sample payload (ints at encoded width, str and bytes, array "
        "bytes), the same numerator for every row; shard MB is on disk.",
        "- peak RSS = VmHWM of the measuring process, reset at the start of the timed section; "
        "Δ RSS = peak minus RSS at that start.",
        "",
    ]
    for workload, n in sizes.items():
        lines += workload_table(bench, workload, n, infos[workload]) + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = harness.option_parser(
        __doc__,
        [
            ("--mixed", 20_000, 'samples in "mixed" (0: skip)'),
            ("--tokens", 20_000, 'samples in "tokens" (0: skip)'),
            ("--reps", 3, "repetitions of each measurement"),
            ("--quick", False, "smoke run: 300 samples each, 1 rep"),
            ("--size-limit", 1 << 26, "shard size limit in bytes (MDS size_limit, litdata chunk_bytes)"),
            ("--hashes", "", "comma list of MDS hashes, e.g. sha1,xxh64"),
            ("--batch-size", 64, "batch_size for streaming.StreamingDataset"),
            ("--seed", 0, None),
            ("--out", str(HERE / "results-latest.md"), "markdown output file"),
        ],
    )
    args = parser.parse_args(argv)

    if args._serve:
        family = args._serve
        harness.serve(lambda: import_family(family), measure)
        return 0

    if args.quick:
        args.mixed, args.tokens, args.reps = min(args.mixed, 300), min(args.tokens, 300), 1
    args.hashes = [h for h in args.hashes.split(",") if h]
    sizes = {w: n for w, n in (("mixed", args.mixed), ("tokens", args.tokens)) if n > 0}

    t0 = time.perf_counter()
    harness.clean_reference_shm()
    with tempfile.TemporaryDirectory(prefix="mds-bench-") as tmp:
        bench = harness.Bench(args, Path(tmp), Path(__file__).resolve())
        try:
            infos = {w: run_workload(bench, w, n) for w, n in sizes.items()}
        finally:
            bench.close()
            harness.clean_reference_shm()
    text = report(bench, sizes, infos, time.perf_counter() - t0)
    harness.write_report(text, args.out)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
