"""The benchmark harness shared by ``bench_format.py``, ``bench_streaming.py``, ``bench_spark.py`` and
``bench_disk.py``: how a measurement is timed, how every payload byte is consumed, how processes are
started, and how figures are summarised. It needs only the standard library and numpy, so each
benchmark environment (ours, the reference's, the reference's Spark 3.5) can import it.

Timing. ``Span`` records wall seconds, CPU seconds (this process's threads plus every child it has
waited for, e.g. DataLoader workers) and peak RSS around a block of code. CPU seconds matter because
some implementations use a second core (background compression, threaded shuffles) and others do not.

Consumption. ``Consumer`` reads every payload byte of a sample or a batch the same way for every
library: it copies each array, ``bytes`` and ``str`` value into one preallocated buffer, as a collate
into a batch (or pinned) buffer does. A reader that returns zero-copy views therefore pays for the
bytes it maps, like one that copies. ``consumer_limit`` runs the same consumer over the same samples
already in memory: the fastest any reader could deliver them to this consumer.

Bytecode. Every library is measured as installed: ``pip install`` compiles a wheel's modules to bytecode, so the
peers' come precompiled. The checkout's packages (``mds_core``, ``pipelines``, run as an editable install) are
compiled by ``compile_project`` before a benchmark measures: where ``PYTHONDONTWRITEBYTECODE`` is set (this machine
sets it), every fresh process would otherwise compile them from source, 0.06 s of ``import mds_core.streaming``
alone.

Summaries. Ratios are ratios of medians (``median(a) / median(b)``); the range beside them is the
smallest and largest per-repetition ratio, pairing repetitions in the order they ran (interleaved).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

PROJECT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------- timing


def compile_project() -> None:
    """Compile the checkout's packages to bytecode, as installing their wheel would (see the module's doc)."""
    import compileall

    for package in ("mds_core", "pipelines"):
        if not compileall.compile_dir(PROJECT / package, quiet=1):
            raise RuntimeError(f"could not compile {PROJECT / package}")


def proc_status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def reset_peak_rss() -> None:
    """Reset VmHWM (Linux >= 4.0), so the peak measured covers the timed section only."""
    with contextlib.suppress(OSError):  # then VmHWM also covers what ran before
        Path("/proc/self/clear_refs").write_text("5")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def shut_down_workers(loader: Any) -> None:
    """Join a DataLoader's workers now, so their CPU and peak RSS are counted.

    Persistent workers (``mds_core``'s default with workers) outlive the epoch; torch joins them
    only when the loader's iterator goes away. Non-persistent ones are already gone: a no-op.
    """
    iterator = getattr(loader, "_iterator", None)  # torch keeps only a persistent loader's iterator
    if iterator is not None:
        iterator._shutdown_workers()
        loader._iterator = None


def children_peak_mb() -> float:
    """Peak RSS of the largest child waited for (DataLoader workers), MB."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def process_tree_cpu(pid: int | None = None) -> dict[int, tuple[str, float]]:
    """CPU seconds of ``pid`` (default: this process) and every live descendant, by pid: ``(comm, seconds)``.

    Read from ``/proc/<pid>/stat`` (Linux): utime + stime of all the process's threads, plus cutime +
    cstime, the CPU of the children it has reaped. Counting the reaped children keeps a difference of
    two readings right when a child (say a short-lived worker) exits between them: its time moves into
    its parent's cutime. Children that are never waited for are lost when they exit.
    """
    root = os.getpid() if pid is None else pid
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        # rest[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17
        stats[int(entry)] = (int(rest[1]), comm, sum(int(v) for v in rest[11:15]) / tick)
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(child)
    tree, todo = {}, [root]
    while todo:
        current = todo.pop()
        if current in stats and current not in tree:
            tree[current] = stats[current][1:]
            todo.extend(children.get(current, []))
    return tree


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds of a process and all its descendants (``process_tree_cpu`` summed)."""
    return sum(seconds for _, seconds in process_tree_cpu(pid).values())


class Span:
    """Wall seconds, CPU seconds (threads and waited-for children) and peak RSS of a ``with`` block."""

    def __enter__(self) -> Span:
        reset_peak_rss()
        self._rss0 = proc_status_kb("VmRSS")
        self._cpu0 = time.process_time() + children_cpu_seconds()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0
        self.stop_cpu()
        hwm = proc_status_kb("VmHWM")
        self.peak_rss_mb, self.delta_rss_mb = hwm / 1024, (hwm - self._rss0) / 1024

    def stop_cpu(self) -> None:
        """Take the CPU reading now (call again once children are reaped to include theirs)."""
        self.cpu_seconds = time.process_time() + children_cpu_seconds() - self._cpu0

    def result(self) -> dict[str, float]:
        return dict(
            seconds=self.seconds,
            cpu_seconds=self.cpu_seconds,
            peak_rss_mb=self.peak_rss_mb,
            delta_rss_mb=self.delta_rss_mb,
        )


# ----------------------------------------------------------------------------- consumption


class Consumer:
    """Copies every array, bytes and str payload of samples or batches into one preallocated buffer.

    The buffer is reused round-robin (like a collate's batch buffer), so memory stays flat. Integers
    and floats are Python objects already unpacked by the reader and are not copied. ``consumed``
    counts the bytes copied, which lets a benchmark check that every payload byte was read. The copy
    is a memoryview slice assignment (a memcpy) because the consumer's own overhead is part of
    every figure: numpy slice assignment cost ~1 µs more per value.
    """

    def __init__(self, capacity: int = 16 << 20) -> None:
        self.buffer = bytearray(capacity)
        self.view = memoryview(self.buffer)
        self.at = 0
        self.consumed = 0

    def __call__(self, value: Any) -> None:
        # A sample's (or batch's) fields are walked here, not by recursion: a call per field cost
        # as much as the copy itself.
        for item in value.values() if isinstance(value, dict) else (value,):
            kind = type(item)
            if kind is bytes or kind is bytearray:
                data = item
            elif kind is str:
                data = item.encode()
            elif kind is np.ndarray:
                data = memoryview(item).cast("B") if item.flags.c_contiguous and item.ndim else item.tobytes()
            elif kind is list or kind is tuple or kind is dict:
                for part in item.values() if kind is dict else item:
                    self(part)
                continue
            elif kind is memoryview:
                data = item if item.format == "B" and item.ndim == 1 else item.cast("B")
            elif hasattr(item, "numpy") and hasattr(item, "is_contiguous"):  # a CPU torch.Tensor
                self(item.contiguous().numpy())
                continue
            else:
                continue  # an int, float or numpy scalar: already unpacked by the reader
            size = len(data)
            if size > len(self.buffer):  # a batch larger than the buffer: grow it once
                self.buffer = bytearray(size)
                self.view = memoryview(self.buffer)
            at = self.at if self.at + size <= len(self.buffer) else 0
            self.view[at : at + size] = data
            self.at = at + size
            self.consumed += size


def consumer_limit(samples: list[Any], min_seconds: float = 0.5) -> dict[str, float]:
    """The consumer over samples already in memory: whole passes for at least ``min_seconds``."""
    consume = Consumer()
    for sample in samples:  # warm the buffer and the samples' pages
        consume(sample)
    passes, cpu0, t0 = 0, time.process_time(), time.perf_counter()
    while True:
        for sample in samples:
            consume(sample)
        passes += 1
        seconds = time.perf_counter() - t0
        if seconds >= min_seconds:
            return dict(
                seconds=seconds / passes,
                cpu_seconds=(time.process_time() - cpu0) / passes,
                consumed=consume.consumed // (passes + 1),
            )


# ----------------------------------------------------------------------------- template processes


def protocol_stdout() -> Any:
    """A private copy of stdout for replies; what libraries print goes to stderr."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return protocol


def reply(measure: Callable[[dict[str, Any]], dict[str, Any]], spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": True, "result": measure(spec)}
    except BaseException:
        return {"ok": False, "error": traceback.format_exc()}


def serve(import_family: Callable[[], None], measure: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Template process: import one library, then fork a fresh measuring process per request.

    Protocol: one JSON spec per line on stdin, one JSON reply per line on stdout. Forking from a
    process that has already imported the library keeps the 2-8 s of imports out of every timing
    and out of every other measurement.
    """
    protocol = protocol_stdout()
    try:
        import_family()
    except Exception:  # the measurements will report the import error themselves
        traceback.print_exc()
    # By the time a training script builds its loader it has collected garbage many times (building
    # the model allocates plenty). A process that only imported has not: its first full collection
    # walks all of torch's heap (~0.12 s here, seen in a first S3 GET) and would land in whichever
    # library's timing allocates enough first. Collected once here, for every library alike.
    gc.collect()
    for line in sys.stdin:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the measuring process
            os.close(read_fd)
            answer = reply(measure, json.loads(line))
            with os.fdopen(write_fd, "w") as out:
                out.write(json.dumps(answer))
            atexit._run_exitfuncs()  # what a normal exit runs (e.g. the reference's shm cleanup)
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd) as inp:
            text = inp.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            text = json.dumps({"ok": False, "error": f"measuring process died (status {status})"})
        protocol.write(text + "\n")
        protocol.flush()


class Bench:
    """Sends measurements to template processes (``script --_serve FAMILY``) and keeps the results."""

    def __init__(self, args: Any, work: Path, script: Path) -> None:
        self.args, self.work, self.script = args, work, script
        compile_project()
        (work / "tmp").mkdir(exist_ok=True)
        # TMPDIR: the reference's lock files (and torch's, litdata's ...) land in our temp dir.
        self.env = dict(
            os.environ,
            TMPDIR=str(work / "tmp"),
            PYTHONWARNINGS="ignore",
            TOKENIZERS_PARALLELISM="false",
            LITDATA_DISABLE_VERSION_CHECK="1",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        self.servers: dict[str, subprocess.Popen[str]] = {}
        self.results: dict[tuple, list[dict[str, Any]]] = {}
        self.errors: dict[tuple, str] = {}

    def server(self, family: str) -> subprocess.Popen[str]:
        if family not in self.servers:
            with open(self.work / f"server-{family}.log", "w") as log:
                self.servers[family] = subprocess.Popen(
                    [sys.executable, str(self.script), "--_serve", family],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env=self.env,
                    cwd=self.work,
                )
        return self.servers[family]

    def close(self) -> None:
        for proc in self.servers.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        self.servers.clear()

    def measure(self, key: tuple, family: str, spec: dict[str, Any]) -> dict[str, Any] | None:
        """One measurement in a process forked from ``family``'s template; its result, or None."""
        if key in self.errors:
            return None  # failed before: don't retry every rep
        before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        proc = self.server(family)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(spec) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        return self.record(key, json.loads(line) if line.strip() else {"ok": False, "error": "process died"}, before)

    def record(self, key: tuple, answer: dict[str, Any], shm_before: set[str]) -> dict[str, Any] | None:
        if not answer["ok"]:
            self.errors[key] = answer["error"].strip().splitlines()[-1][:200]
            print(f"  FAILED {key}: {answer['error']}", file=sys.stderr)
            return None
        res = answer["result"]
        self.results.setdefault(key, []).append(res)
        if res.get("verified") is False:
            print(f"  WRONG DATA {key}", file=sys.stderr)
        if res.get("shm_prefix", -1) >= 0:  # leftovers of that (finished) process only
            unlink_shm(f"{res['shm_prefix']:06d}_", shm_before)
        if "seconds" in res:
            print(
                f"  {key} {res['seconds']:.3f}s cpu {res.get('cpu_seconds', 0):.3f}s "
                f"peak {res.get('peak_rss_mb', 0):.0f}MB",
                file=sys.stderr,
            )
        return res

    def all(self, key: tuple, field: str) -> list[Any]:
        return [r[field] for r in self.results.get(key, []) if field in r]

    def med(self, key: tuple, field: str) -> float | None:
        return median(self.all(key, field))

    def fastest(self, impls: list[str], key_of: Callable[[str], tuple]) -> str | None:
        """Of ``impls``, the one with the smallest median time for ``key_of(impl)`` (None if none ran)."""
        medians = {impl: seconds for impl in impls if (seconds := self.med(key_of(impl), "seconds"))}
        return min(medians, key=medians.__getitem__, default=None)

    def error_note(self, key: tuple) -> list[str]:
        return [f"error: {self.errors[key]}"] if key in self.errors else []


def unlink_shm(prefix: str, before: set[str]) -> None:
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix) and name not in before:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join("/dev/shm", name))


def clean_reference_shm() -> None:
    """The reference's own cleanup of leaked /dev/shm segments (run before and after a benchmark).

    It unlinks the streaming segments of *any* process on this machine, so don't run a benchmark
    while something else uses streaming.StreamingDataset.
    """
    try:
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    except Exception as exc:  # cleanup must not fail the run
        print(f"clean_stale_shared_memory failed: {exc}", file=sys.stderr)


# ----------------------------------------------------------------------------- command line


def option_parser(doc: str, options: Iterable[tuple[str, Any, str | None]], **kwargs: Any) -> argparse.ArgumentParser:
    """A script's parser: its docstring's first paragraph, one ``(flag, default, help)`` row per option and
    the hidden ``--_serve FAMILY`` of its template processes. An option's type is its default's (``str``
    for None); ``True``/``False`` defaults make ``store_false``/``store_true`` switches.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0], **kwargs)
    for flag, default, text in options:
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_false" if default else "store_true", help=text)
        else:
            kind = str if default is None else type(default)
            parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument("--_serve", help=argparse.SUPPRESS)
    return parser


# ----------------------------------------------------------------------------- summaries


def median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def median_of(values: Iterable[float]) -> float:
    """The median of figures that must be there (a measurement that ran at least once)."""
    value = median(values)
    if value is None:
        raise ValueError("no figures to take the median of")
    return value


def spread(values: list[float], digits: int = 1) -> str:
    """``20.7 [20.1–21.5]``: the median and the smallest and largest value."""
    if not values:
        return "—"
    return f"{median(values):,.{digits}f} [{min(values):,.{digits}f}–{max(values):,.{digits}f}]"


def ratio_of_medians(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """``median(a) / median(b)`` and the smallest and largest per-rep ratio ``a[i] / b[i]``."""
    median_a, median_b = median(a), median(b)
    if median_a is None or not median_b:
        return None
    per_rep = [x / y for x, y in zip(a, b) if y]
    return median_a / median_b, min(per_rep or [0]), max(per_rep or [0])


def ratio_cell(value: tuple[float, float, float] | None, target: float | None = None, at_most: bool = False) -> str:
    """``1.52× [1.40–1.61]``, with ``met``/``not met`` against a target when one is given."""
    if value is None:
        return "—"
    mid, lo, hi = value
    text = f"**{mid:.2f}×** [{lo:.2f}–{hi:.2f}]"
    if target is not None:
        met = mid <= target if at_most else mid >= target
        text += f" ({'met' if met else 'not met'}: {'≤' if at_most else '≥'} {target:g}×)"
    return text


def speedup(ours_seconds: list[float], theirs_seconds: list[float], target: float | None = None) -> str:
    """How many times faster ours is: their median time over ours, as a ratio cell."""
    return ratio_cell(ratio_of_medians(theirs_seconds, ours_seconds), target)


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("mosaicml-streaming", "litdata", "torch", "mds-pipelines", "pyspark"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def write_report(text: str, out: str) -> None:
    """Print the markdown report and write it to ``out``."""
    print(text)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text + "\n")
    print(f"\nwritten to {out}", file=sys.stderr)


def header(title: str, wall: float, settings: str) -> list[str]:
    """The first lines of every report: command, date, machine, versions, settings."""
    ver = versions()
    cmd = shlex.join([os.path.relpath(sys.executable)] + sys.argv)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return [
        f"# {title}",
        "",
        f"- command: `{cmd}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; wall time {wall:.0f} s",
        f"- machine: nproc {len(os.sched_getaffinity(0))}, {platform.machine()}, {ram:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; python {ver['python']}, numpy {ver['numpy']}, "
        f"torch {ver['torch']}",
        f"- mosaicml-streaming {ver['mosaicml-streaming']}, litdata {ver['litdata']}, "
        f"mds_core (mds-pipelines) {ver['mds-pipelines']}",
        f"- settings: {settings}",
        "",
    ]
