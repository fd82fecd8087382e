"""Finding 4: a compressed shard is cut off at the raw size its index declares, on every reader path.

Each codec's bomb (a small file that inflates to 256 MiB of zeros; 64 MiB for snappy, whose ratio is
about 21x) replaces shard 0 of a two-shard dataset whose index still declares a raw size of 286 bytes
(the issue's try). A fresh child process reads it three ways: ``LocalDataset(dir)[0]``, a
``StreamingDataset`` over the directory as its remote (download, then ``ShardCache``'s
decompression), and ``mds verify``. The child may write no file past 8 MiB (``RLIMIT_FSIZE``, with
SIGXFSZ ignored so that a write past it fails with EFBIG instead of killing the child), and reports,
for each read, the bytes it wrote (``wchar`` of ``/proc/self/io``: every ``write``), the largest file
a polling thread saw, and how far its peak RSS rose above a baseline: the same three reads of the
dataset before shard 0 was replaced.
"""

from __future__ import annotations

import bz2
import contextlib
import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mds_core import MDSWriter

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
DECLARED = 286  # the raw size the bomb's index entry claims
FSIZE_LIMIT = 8 * MiB  # RLIMIT_FSIZE of the child: no file it writes may pass this
MAX_WRITTEN = 4 * MiB  # what a bounded read may write: the download of the zip (snappy's is 3 MiB) and a chunk
MAX_RSS_GROWTH = 64 * MiB  # over the benign reads: a few decompression chunks, never the inflated data
CODECS = ["zstd", "gz", "bz2", "br", "snappy"]
READS = ["LocalDataset", "StreamingDataset", "mds verify"]


@functools.cache
def _bomb(family: str) -> bytes:
    """A small ``family`` file that inflates to 256 MiB of zeros (snappy: 64 MiB, about 3 MiB packed)."""
    zeros = bytes(MiB)
    if family == "zstd":  # one frame, as the PoC: zstd's RLE blocks give ~32,000x
        import zstandard

        return zstandard.ZstdCompressor(write_content_size=True).compress(bytes(256 * MiB))
    if family == "gz":  # concatenated members are one gzip stream
        return gzip.compress(zeros, 9, mtime=0) * 256
    if family == "bz2":  # concatenated streams, likewise
        return bz2.compress(zeros, 9) * 256
    if family == "br":
        import brotli

        compressor = brotli.Compressor(quality=5)
        return b"".join([compressor.process(zeros) for _ in range(256)] + [compressor.finish()])
    import cramjam

    return bytes(cramjam.snappy.compress_raw(bytes(64 * MiB)))


def _datasets(base: Path, family: str) -> tuple[Path, Path]:
    """(benign, bombed): two one-sample shards; in ``bombed`` shard 0 is the bomb, declared 286 bytes raw."""
    benign, bombed = base / "benign", base / "bombed"
    with MDSWriter(out=str(benign), columns={"id": "int", "payload": "bytes"}, compression=family, size_limit=300) as w:
        for i in range(2):
            w.write({"id": i, "payload": bytes([i]) * 200})
    shutil.copytree(benign, bombed)
    index = json.loads((bombed / "index.json").read_text())
    entry = index["shards"][0]
    bomb = _bomb(family)
    (bombed / entry["zip_data"]["basename"]).write_bytes(bomb)
    entry["zip_data"]["bytes"], entry["raw_data"]["bytes"] = len(bomb), DECLARED
    (bombed / "index.json").write_text(json.dumps(index))
    return benign, bombed


def run_child(base: Path, family: str, fsize_limit: int | None = FSIZE_LIMIT) -> dict[str, Any]:
    """Read ``base``'s datasets in a fresh interpreter (see ``child_main``); its report."""
    scratch = base / "tmp"
    scratch.mkdir(exist_ok=True)
    args = {"base": str(base), "family": family, "fsize_limit": fsize_limit}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.security.test_bombs import child_main; child_main(sys.argv[1])"]
        + [json.dumps(args)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},  # where verify's scratch files go: watched too
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the child failed:\n{done.stdout}\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def child_main(arguments: str) -> None:
    """In the child: limit file sizes, do the benign reads (the baseline), then the three bomb reads."""
    import resource
    import signal

    args = json.loads(arguments)
    base = Path(args["base"])
    if args["fsize_limit"] is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (args["fsize_limit"], args["fsize_limit"]))
    watcher = _LargestFile([base], skip=f".{args['family']}")
    for read in READS:  # the baseline: every code path run once, on shards that are what they claim
        _read(read, base / "benign", base / "cache-benign")
    baseline = _max_rss()
    report: dict[str, Any] = {"baseline_rss": baseline}
    for read in READS:
        watcher.peak, written = 0, _wchar()
        outcome = _read(read, base / "bombed", base / "cache-bombed")
        report[read] = {
            "outcome": outcome,
            "written": _wchar() - written,
            "largest_file": watcher.peak,
            "rss_growth": _max_rss() - baseline,
        }
    watcher.stop()
    print(json.dumps(report))


def _read(read: str, root: Path, cache: Path) -> str:
    """Sample 0 read the ``read`` way: "ok", or the error's type and message."""
    from click.testing import CliRunner

    from mds_core import LocalDataset, StreamingDataset, cli

    try:
        if read == "LocalDataset":
            LocalDataset(str(root))[0]
        elif read == "StreamingDataset":
            dataset = StreamingDataset(remote=str(root), local=str(cache), batch_size=1)
            next(iter(dataset))
        else:
            result = CliRunner().invoke(cli.main, ["verify", str(root)])
            return f"exit {result.exit_code}: {result.output.strip()}"
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return "ok"


def _max_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _wchar() -> int:
    """Bytes this process has passed to write(2) and friends, all threads together."""
    with open("/proc/self/io") as file:
        return next(int(line.split()[1]) for line in file if line.startswith("wchar:"))


class _LargestFile:
    """A thread that polls the folders every millisecond for the largest file in them (a lower bound),
    but for the compressed shards themselves (``skip``: their suffix), which are inputs."""

    def __init__(self, folders: list[Path], skip: str) -> None:
        import threading

        self.folders, self.skip, self.peak = folders, skip, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.001):
            for folder in self.folders:
                for parent, _, names in os.walk(folder):
                    for name in names:
                        if name.endswith(self.skip):
                            continue
                        with contextlib.suppress(OSError):  # renamed or removed meanwhile
                            self.peak = max(self.peak, os.stat(os.path.join(parent, name)).st_size)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _figures(family: str, report: dict[str, Any]) -> str:
    lines = [f"{family}: baseline peak RSS {report['baseline_rss'] / MiB:.1f} MiB"]
    for read in READS:
        step = report[read]
        lines.append(
            f"  {read:<16} wrote {step['written']:>11,} B, largest file {step['largest_file']:>11,} B, "
            f"peak RSS +{step['rss_growth'] / MiB:.1f} MiB: {step['outcome'][:300]}"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("family", CODECS)
def test_a_decompression_bomb_is_cut_off_at_its_declared_size(family: str, tmp_path: Path) -> None:
    _datasets(tmp_path, family)
    report = run_child(tmp_path, family)
    figures = _figures(family, report)
    print(figures)
    shard = f"shard.00000.mds.{family}"
    for read in ("LocalDataset", "StreamingDataset"):
        outcome = report[read]["outcome"]
        assert outcome.startswith("CorruptShardError: ") and shard in outcome, figures
        assert f"declared {DECLARED} bytes" in outcome, figures
    verify = report["mds verify"]["outcome"]
    assert verify.startswith("exit 1: ") and shard in verify and f"declared {DECLARED} bytes" in verify, figures
    for read in READS:
        assert report[read]["written"] <= MAX_WRITTEN, figures
        assert report[read]["largest_file"] <= MAX_WRITTEN, figures
        assert report[read]["rss_growth"] <= MAX_RSS_GROWTH, figures
    for folder in ("bombed", "cache-bombed"):  # no partial raw shard is left behind, under any name
        assert not list((tmp_path / folder).rglob("*.tmp")) and not (tmp_path / folder / "shard.00000.mds").exists()
