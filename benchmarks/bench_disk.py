#!/usr/bin/env python3
"""Cold-read benchmark: mds_core.LocalDataset reading a dataset from local disk, beyond the page cache.

It answers one question: does in-order reading of a dataset that is not in memory keep up with the
disk? (target: at least 80% of the disk's own sequential read rate, measured in the same run on the
same files). Not part of CI: it writes and reads tens of GiB. Run it on a quiet machine::

    .venv/bin/python benchmarks/bench_disk.py            # full: 1.25 x RAM, 3 reps
    .venv/bin/python benchmarks/bench_disk.py --quick    # = --gib 2 --reps 1: cold by eviction only

The full run needs 1.25 x RAM of free disk (checked first) and reads about 7.5 x RAM (six passes);
the first run also writes the dataset (about as long as one disk pass), later runs reuse it
(``rm -r data/bench-disk`` frees the space).

Steps:

1. Dataset. An uncompressed MDS dataset of ``--gib`` GiB of shard files (default 1.25 x this
   machine's RAM) is written with ``mds_core.MDSWriter`` (64 MiB shards) into ``--dir`` (default
   ``data/bench-disk/<workload>`` in the repository, which git ignores), unless a complete one of
   the same workload, size and shard size is already there (``bench-disk.json`` marks it complete).
   Workloads: ``tokens`` (one ``ndarray:uint16:2048`` column, 4 KiB a sample, the usual
   larger-than-RAM case) or ``mixed`` (int, int32, ~200 B str, ~8 KiB bytes, 64 float32). Samples
   cycle through a pool of random ones: not unique, but not compressible either.
2. Eviction. Before every timed pass, each shard file is fsynced and dropped from the page cache
   with ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` (no root needed); ``mincore`` then checks
   how much of the dataset is still resident, which the report shows. Eviction makes even a small
   dataset read cold (the quick check); at the default size the dataset is also larger than RAM, so
   nothing could stay cached between passes even without it (``--no-evict`` measures that way).
3. Disk pass (the dd-style baseline): every shard file in order, ``readinto`` an 8 MiB buffer
   until its end, like ``dd if=FILE of=/dev/null bs=8M`` over the files one after another.
4. Reader pass: ``LocalDataset(dir)``, ``for sample in ds: consume(sample)`` with the harness's
   ``Consumer`` (every payload byte is copied into a preallocated buffer), then ``ds.close()``.

Each pass runs in a fresh process forked from a template that has imported mds_core. The two
passes alternate, ``--reps`` times (disk first in odd reps, reader first in even ones). The report
(``--out``) gives medians with min-max, and the reader/disk ratio of median MB/s. To tell an
I/O-bound reader from a CPU-bound one it also splits each pass's wall time into CPU seconds, time
blocked (mostly waiting for the disk) and time waiting for a CPU (other load), and gives the
reader's CPU bound (shard bytes / its CPU seconds) next to the cost of the Consumer alone.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import bench_format as bf
import harness

MARKER = "bench-disk.json"
MARKER_VERSION = 2  # 2: the mixed pool comes from bench_format.make_samples
DISK_BLOCK = 8 << 20  # the dd-style pass reads this much per call
TARGET = 0.8  # reader MB/s over disk MB/s
POOL = 4099  # distinct samples the writer cycles through (prime: shards do not repeat each other)
WORKLOAD_COLUMNS = bf.WORKLOAD_COLUMNS  # the same two workloads as the format benchmark


def ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gib(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB"


# ----------------------------------------------------------------------------- the dataset


def sample_pool(workload: str, seed: int) -> list[dict[str, Any]]:
    """POOL random samples of the format benchmark's generator; the writer cycles through them (``id`` set per sample)."""
    return bf.make_samples(workload, POOL, seed)


def encoded_bytes(workload: str, sample: dict[str, Any]) -> int:
    """Bytes of one sample in a shard: its data, its size table and its offset entry."""
    if workload == "tokens":
        return 4096 + 4
    return 4 * 2 + 8 + 4 + len(sample["text"]) + len(sample["image"]) + 256 + 4


def payload_bytes(workload: str, sample: dict[str, Any]) -> int:
    """What the Consumer copies of one sample (ints are Python objects: not copied)."""
    if workload == "tokens":
        return 4096
    return len(sample["text"]) + len(sample["image"]) + 256


def shard_files(path: Path) -> list[Path]:
    """The dataset's shard files, in the index's order (the order LocalDataset reads them)."""
    index = json.loads((path / "index.json").read_text())
    return [path / shard["raw_data"]["basename"] for shard in index["shards"]]


def ours(name: str) -> bool:
    return name in ("index.json", MARKER) or (name.startswith("shard.") and name.endswith(".mds"))


def existing_dataset(path: Path, want: dict[str, Any]) -> dict[str, Any] | None:
    """The marker of a complete dataset with the wanted settings at ``path``, or None."""
    try:
        marker = json.loads((path / MARKER).read_text())
        if any(marker.get(key) != value for key, value in want.items()):
            return None
        files = shard_files(path)
        if sum(f.stat().st_size for f in files) != marker["shard_bytes"]:
            return None
        return marker
    except (OSError, ValueError, KeyError, TypeError):
        return None


def prepare_dir(path: Path, need: int) -> None:
    """Empty ``path`` (only if it holds nothing but a dataset of ours) and check free space."""
    old = 0
    if path.exists():
        names = os.listdir(path)
        strange = [n for n in names if not ours(n)]
        if strange:
            sys.exit(f"{path} holds files this benchmark did not write ({', '.join(strange[:5])}); pick another --dir")
        old = sum((path / n).stat().st_size for n in names)
    probe = path
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free + old
    if free < need:
        sys.exit(
            f"not enough disk space: the dataset needs {gib(need)} in {probe} "
            f"(filesystem of --dir {path}), but only {gib(free)} is free there"
            f"{' (counting the old dataset it would replace)' if old else ''}. "
            "Pass a smaller --gib or a --dir on a larger disk."
        )
    if path.exists():
        for name in os.listdir(path):
            (path / name).unlink()
    path.mkdir(parents=True, exist_ok=True)


def write_dataset(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Write the dataset (or reuse a complete one); its marker, with ``write`` timings if written."""
    want = {
        "version": MARKER_VERSION,
        "workload": args.workload,
        "target_bytes": args.target_bytes,
        "size_limit": args.size_limit,
        "seed": args.seed,
    }
    marker = existing_dataset(path, want)
    if marker is not None:
        print(f"reusing the complete dataset in {path} ({gib(marker['shard_bytes'])})", file=sys.stderr)
        return marker

    from tqdm import tqdm

    from mds_core import MDSWriter

    pool = sample_pool(args.workload, args.seed)
    mean = sum(encoded_bytes(args.workload, s) for s in pool) / len(pool)
    n = math.ceil(args.target_bytes / mean)
    prepare_dir(path, int(args.target_bytes * 1.02) + (64 << 20))
    print(f"writing {n:,} {args.workload} samples (~{gib(args.target_bytes)}) to {path}", file=sys.stderr)
    payload = 0
    t0 = time.perf_counter()
    with (
        MDSWriter(
            out=str(path),
            columns=WORKLOAD_COLUMNS[args.workload],
            compression=None,
            size_limit=args.size_limit,
            exist_ok=True,
        ) as writer,
        tqdm(
            total=n * mean, unit="B", unit_scale=True, unit_divisor=1024, desc="write", mininterval=1.0, smoothing=0.1
        ) as bar,
    ):
        step = 0
        mixed = args.workload == "mixed"
        for i in range(n):
            sample = pool[i % POOL]
            if mixed:
                sample["id"] = i
            writer.write(sample)
            payload += payload_bytes(args.workload, sample)
            step += 1
            if step == 4096:
                bar.update(step * mean)
                step = 0
        bar.update(step * mean)
    files = shard_files(path)
    for f in files:  # on disk before the write counts as done
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    seconds = time.perf_counter() - t0
    marker = dict(
        want, samples=n, shards=len(files), payload_bytes=payload, shard_bytes=sum(f.stat().st_size for f in files)
    )
    (path / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return dict(marker, write_seconds=seconds)


# ----------------------------------------------------------------------------- page cache


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(files: list[Path]) -> int:
    """Bytes of the files in the page cache (``mincore`` over a mapping that is never touched)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if not size:
                continue
            addr = _libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            if addr in (None, _MAP_FAILED):
                raise OSError(ctypes.get_errno(), f"mmap {f}")
            try:
                vec = ctypes.create_string_buffer((size + page - 1) // page)
                if _libc.mincore(addr, size, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {f}")
                total += int(np.count_nonzero(np.frombuffer(vec.raw, np.uint8) & 1)) * page
            finally:
                _libc.munmap(addr, size)
        finally:
            os.close(fd)
    return min(total, sum(f.stat().st_size for f in files))


def evict(files: list[Path]) -> None:
    """Drop the files from the page cache: fsync (dirty pages cannot be dropped), then DONTNEED."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def device_info(path: Path) -> str:
    """The block device and filesystem under ``path``, with the readahead the kernel uses for it."""
    best, fstype = "", "?"
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        mount = fields[1].replace("\\040", " ")
        if (str(path) + "/").startswith(mount.rstrip("/") + "/") and len(mount) >= len(best):
            best, fstype = mount, fields[2]
    dev = os.stat(path).st_dev
    sysdir = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sysdir.exists():
        return f"{fstype} on {best or '?'}, no block device (overlay, tmpfs or network: not a disk rate)"
    sysdir = sysdir.resolve()
    queue = sysdir / "queue" if (sysdir / "queue").exists() else sysdir.parent / "queue"

    def read(name: str) -> str:
        try:
            return (queue / name).read_text().strip()
        except OSError:
            return "?"

    return (
        f"{sysdir.name} ({fstype} on {best}), read_ahead_kb {read('read_ahead_kb')}, "
        f"max_sectors_kb {read('max_sectors_kb')}, rotational {read('rotational')}"
    )


# ----------------------------------------------------------------------------- measured passes


def io_read_bytes() -> int:
    """Bytes this process caused to be fetched from storage (``/proc/self/io`` read_bytes)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def runqueue_seconds() -> float:
    """Seconds this thread has waited for a CPU while runnable (``/proc/thread-self/schedstat``)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def disk_pass(files: list[Path]) -> dict[str, Any]:
    view = memoryview(bytearray(DISK_BLOCK))
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while True:
                got = fh.readinto(view)
                if not got:
                    break
                total += got
    return {"bytes_read": total}


def reader_pass(path: Path) -> dict[str, Any]:
    from mds_core import LocalDataset

    consume = harness.Consumer()
    samples = 0
    ds = LocalDataset(local=str(path))
    try:
        for sample in ds:
            consume(sample)
            samples += 1
    finally:
        ds.close()
    return {"samples": samples, "consumed": consume.consumed}


def consumer_alone(path: Path, budget: int = 256 << 20) -> dict[str, Any]:
    """The Consumer over the first ``budget`` payload bytes of samples, copied into memory first."""
    from mds_core import LocalDataset

    samples, size = [], 0
    with LocalDataset(local=str(path)) as ds:
        for sample in ds:
            samples.append({k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in sample.items()})
            size += payload_bytes("tokens" if "tokens" in sample else "mixed", sample)
            if size >= budget:
                break
    return dict(harness.consumer_limit(samples), payload=size)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One timed pass, in a process forked from the template (run by ``harness.serve``)."""
    path = Path(spec["dir"])
    if spec["op"] == "consumer":
        return consumer_alone(path)
    files = shard_files(path)
    if spec["evict"]:
        evict(files)
    resident = resident_bytes(files)
    io0, usage0 = io_read_bytes(), resource.getrusage(resource.RUSAGE_SELF)
    queued0 = runqueue_seconds()
    with harness.Span() as span:
        out = disk_pass(files) if spec["op"] == "disk" else reader_pass(path)
    queued = runqueue_seconds() - queued0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return dict(
        span.result(),
        **out,
        resident_before=resident,
        io_read_bytes=io_read_bytes() - io0,
        runqueue_seconds=queued,
        blocked_seconds=span.seconds - span.cpu_seconds - queued,
        major_faults=usage.ru_majflt - usage0.ru_majflt,
        minor_faults=usage.ru_minflt - usage0.ru_minflt,
    )


def import_family() -> None:
    from mds_core import LocalDataset  # noqa: F401


# ----------------------------------------------------------------------------- report


def report(bench: harness.Bench, args: argparse.Namespace, path: Path, info: dict[str, Any], wall: float) -> str:
    shard_bytes, samples = info["shard_bytes"], info["samples"]
    ram = ram_bytes()
    settings = (
        f"workload={args.workload}, dataset {gib(shard_bytes)} of shard files = "
        f"{shard_bytes / ram:.2f} x RAM ({'larger' if shard_bytes > ram else 'smaller'} than RAM), "
        f"{info['shards']} shards (size_limit {args.size_limit:,} B, uncompressed), "
        f"{samples:,} samples, reps={args.reps}, "
        f"eviction={'posix_fadvise(POSIX_FADV_DONTNEED) before every pass' if args.evict else 'off'}, "
        f"dir={path}, device {device_info(path)}"
    )
    lines = harness.header("Cold read from local disk: mds_core.LocalDataset vs the disk", wall, settings)
    lines += [
        "How to read it:",
        "- disk = the disk's own sequential read rate, measured in this run on the same shard files: "
        f"each file in index order, `readinto` of a {DISK_BLOCK >> 20} MiB buffer to its end "
        f"(like `dd bs={DISK_BLOCK >> 20}M` over the files).",
        "- reader = `LocalDataset(dir)`, `for sample in ds: consume(sample)` (every payload byte copied "
        "into a preallocated buffer by the harness Consumer), `ds.close()`; timed from the open.",
        "- MB/s = shard-file bytes (10^6 B) over wall seconds, for both rows. Each pass ran in a fresh "
        "process forked from a template that had imported mds_core; the passes alternated "
        "(disk first in odd reps, reader first in even ones).",
        (
            "- cold: "
            + (
                "before every pass each shard file was fsynced and dropped from the page cache with "
                "`os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)` (no root needed). "
                if args.evict
                else "no eviction (--no-evict): only the dataset size keeps it cold. "
            )
            + '"resident before" is what `mincore` still found cached at the start of the pass; '
            '"storage read" is `/proc/self/io` read_bytes of the pass (bytes fetched from the device, '
            "readahead included). A dataset smaller than RAM reads cold only through the eviction; at "
            "the default size (1.25 x RAM) it cannot stay cached either way. On a virtual machine the "
            'host may cache the disk image, so "disk" can exceed the physical device.'
        ),
        "- blocked s = wall - CPU - run-queue s: the time the pass slept, mostly waiting for the disk "
        "(page faults or reads the readahead had not finished). run-queue s = time it was runnable but "
        "waited for a CPU (`/proc/thread-self/schedstat`): other load on the machine; both passes are "
        "single-threaded.",
        "- CPU s = user + system seconds of the pass; peak RSS = VmHWM, which for the reader includes "
        "the mapped shard pages (file-backed, reclaimable).",
        "",
    ]
    if "write_seconds" in info:
        lines += [
            f"Dataset written in this run: {info['write_seconds']:.1f} s, "
            f"{shard_bytes / info['write_seconds'] / 1e6:,.0f} MB/s (writer + fsync).",
            "",
        ]
    else:
        lines += ["Dataset reused from an earlier run (complete-marker `bench-disk.json` matched).", ""]

    def mbps(key: tuple) -> list[float]:
        return [shard_bytes / s / 1e6 for s in bench.all(key, "seconds")]

    def rng(values: list[float], digits: int = 0) -> str:
        if not values:
            return "—"
        return (
            f"**{harness.fmt(harness.median(values), digits)}** "
            f"[{harness.fmt(min(values), digits)}–{harness.fmt(max(values), digits)}]"
        )

    lines += [
        "| pass | MB/s (median [min–max]) | samples/s | wall s | CPU s | CPU % of wall | "
        "blocked s | run-queue s | peak RSS MB | major faults | resident before | storage read |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for op, label in (("disk", f"disk (readinto {DISK_BLOCK >> 20} MiB)"), ("reader", "mds_core.LocalDataset")):
        key = (op,)
        secs = bench.all(key, "seconds")
        if not secs:
            lines.append(f"| {label} | — {' '.join(bench.error_note(key))} |" + " |" * 10)
            continue
        cpu = bench.all(key, "cpu_seconds")
        sps = [samples / s for s in secs] if op == "reader" else []
        lines.append(
            f"| {label} | {rng(mbps(key))} | {rng(sps)} | {harness.fmt(harness.median(secs), 2)} | "
            f"{harness.fmt(harness.median(cpu), 2)} | "
            f"{harness.fmt(100 * harness.median_of(c / s for c, s in zip(cpu, secs)))}% | "
            f"{harness.fmt(bench.med(key, 'blocked_seconds'), 2)} | "
            f"{harness.fmt(bench.med(key, 'runqueue_seconds'), 2)} | "
            f"{harness.fmt(bench.med(key, 'peak_rss_mb'))} | "
            f"{harness.fmt(bench.med(key, 'major_faults'))} | "
            f"{harness.fmt(100 * max(bench.all(key, 'resident_before')) / shard_bytes, 1)}% (max) | "
            f"{harness.fmt(100 * harness.median_of(bench.all(key, 'io_read_bytes')) / shard_bytes)}% |"
        )
    ratio = harness.ratio_of_medians(mbps(("reader",)), mbps(("disk",)))
    lines += [
        "",
        (f"**reader / disk** (ratio of median MB/s, [per-rep range]): {harness.ratio_cell(ratio, TARGET)}"),
        "",
    ]
    reader_cpu = bench.med(("reader",), "cpu_seconds")
    consumer_runs = bench.results.get(("consumer",))
    alone = consumer_runs[0] if consumer_runs else None
    if reader_cpu:
        line = (
            f"CPU bound of the reader: shard bytes / its median CPU seconds = "
            f"**{shard_bytes / reader_cpu / 1e6:,.0f} MB/s**, the most it could reach on one core with I/O "
            "fully overlapped"
        )
        if alone:
            whole = alone["seconds"] / alone["payload"] * info["payload_bytes"]
            line += (
                f"; of its {reader_cpu:.2f} CPU s, the harness Consumer alone (the same samples already in "
                f"memory, `harness.consumer_limit` over the first {alone['payload'] >> 20} MiB) "
                f"accounts for about {whole:.2f} s ({shard_bytes / whole / 1e6:,.0f} MB/s)"
            )
        lines += [line + ". If that bound is below the disk rate, the reader is CPU-bound, not I/O-bound.", ""]

    wrong = [
        r
        for r in bench.results.get(("reader",), [])
        if r["samples"] != samples or r["consumed"] != info["payload_bytes"]
    ]
    short = [r for r in bench.results.get(("disk",), []) if r["bytes_read"] != shard_bytes]
    lines.append(
        "Check: "
        + (
            "**FAILED**: "
            + "; ".join(
                [f"reader got {r['samples']:,} samples / {r['consumed']:,} B" for r in wrong]
                + [f"disk read {r['bytes_read']:,} B" for r in short]
            )
            if wrong or short
            else f"every reader pass consumed all {samples:,} samples ({info['payload_bytes']:,} payload bytes); "
            f"every disk pass read all {shard_bytes:,} B."
        )
    )
    lines += ["", "Per rep (MB/s, in the order run):", ""]
    for key in (("disk",), ("reader",)):
        lines.append(f"- {key[0]}: " + ", ".join(f"{v:,.0f}" for v in mbps(key)))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = harness.option_parser(
        __doc__,
        [
            ("--dir", None, "dataset directory (default: <repo>/data/bench-disk/<workload>, git-ignored)"),
            ("--reps", 3, "repetitions of each pass (interleaved)"),
            ("--size-limit", 1 << 26, "MDS shard size limit in bytes"),
            ("--quick", False, "smoke run: --gib 2 (unless given), --reps 1"),
            ("--seed", 0, None),
            ("--out", str(HERE / "results-disk-latest.md"), "markdown report"),
        ],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument(
        "--gib",
        type=float,
        default=None,
        help=f"dataset size in GiB of shard files (default 1.25 x RAM = {1.25 * ram_bytes() / 2**30:.1f})",
    )
    parser.add_argument("--workload", choices=sorted(WORKLOAD_COLUMNS), default="tokens")
    parser.add_argument(
        "--no-evict",
        dest="evict",
        action="store_false",
        help="do not drop the files from the page cache before each pass",
    )
    args = parser.parse_args(argv)

    if args._serve:
        harness.serve(import_family, measure)
        return 0

    if args.quick:
        args.gib, args.reps = 2.0 if args.gib is None else args.gib, 1
    args.target_bytes = int((args.gib if args.gib is not None else 1.25 * ram_bytes() / 2**30) * 2**30)
    path = Path(args.dir) if args.dir else REPO / "data" / "bench-disk" / args.workload
    path = path.resolve()
    if args.target_bytes <= ram_bytes():
        print(
            f"NOTE: {gib(args.target_bytes)} fits in RAM ({gib(ram_bytes())}); "
            + (
                "it reads cold only because every pass evicts it first."
                if args.evict
                else "with --no-evict the passes will read from the page cache."
            ),
            file=sys.stderr,
        )

    t0 = time.perf_counter()
    info = write_dataset(args, path)
    with tempfile.TemporaryDirectory(prefix="mds-bench-disk-") as tmp:
        bench = harness.Bench(args, Path(tmp), Path(__file__).resolve())
        try:
            for rep in range(args.reps):
                for op in ("disk", "reader") if rep % 2 == 0 else ("reader", "disk"):
                    print(f"rep {rep + 1}/{args.reps}: {op}", file=sys.stderr)
                    bench.measure((op,), "ours", {"op": op, "dir": str(path), "evict": args.evict})
            bench.measure(("consumer",), "ours", {"op": "consumer", "dir": str(path), "evict": False})
        finally:
            bench.close()
    text = report(bench, args, path, info, time.perf_counter() - t0)
    harness.write_report(text, args.out)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
