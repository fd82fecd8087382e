#!/usr/bin/env python3
"""Side-by-side benchmark: mds_core vs the reference (mosaicml-streaming) vs litdata.

One run measures, on the same generated samples:

* writers: ``mds_core.MDSWriter``, ``streaming.MDSWriter`` and litdata's
  ``litdata.streaming.writer.BinaryWriter`` (litdata's lowest-overhead native write path:
  what ``litdata.optimize`` runs inside each of its worker processes, minus the worker pool),
  each uncompressed and with ``compression="zstd"``;
* readers, random access (one fixed permutation of all indices) and in-order iteration:
  ``mds_core.LocalDataset``, ``streaming.StreamingDataset`` (the reference row),
  ``streaming.LocalDataset`` (extra row) and ``litdata.StreamingDataset``. The MDS readers all
  read the shards written by the reference writer; litdata reads its own chunks;
* the page-cache read rate of the uncompressed shard files (plain large ``readinto`` of every
  file, after a warming pass), against which in-order reading is reported as a percentage.

Every measurement runs in its own fresh process, ``--reps`` times, interleaved; the table
shows medians. To keep the run short, the processes are forked from one template process per
library (which has only imported that library: torch + streaming, litdata, or mds_core), so a
measurement neither pays nor shares the 2-8 s import; each forked process measures its own
peak RSS (VmHWM, reset at the start of the timed section). Run with the benchmark venv::

    bash benchmarks/setup_env.sh
    benchmarks/.venv/bin/python benchmarks/bench_format.py            # full (a few minutes)
    benchmarks/.venv/bin/python benchmarks/bench_format.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

WORKLOAD_COLUMNS: dict[str, dict[str, str]] = {
    'mixed': {
        'id': 'int',
        'label': 'int32',
        'text': 'str',
        'image': 'bytes',
        'emb': 'ndarray:float32:64',
    },
    'tokens': {
        'tokens': 'ndarray:uint16:2048',
    },
}
WRITERS = ['ours', 'ref', 'litdata']
READERS = ['ours', 'ref', 'ref-local', 'litdata']  # 'ref' = streaming.StreamingDataset
COMPRESSIONS: list[str | None] = [None, 'zstd']
MODES = ['random', 'in-order']
LABELS = {
    ('write', 'ours'): 'mds_core.MDSWriter',
    ('write', 'ref'): 'streaming.MDSWriter',
    ('write', 'litdata'): 'litdata BinaryWriter',
    ('read', 'ours'): 'mds_core.LocalDataset',
    ('read', 'ref'): 'streaming.StreamingDataset',
    ('read', 'ref-local'): 'streaming.LocalDataset',
    ('read', 'litdata'): 'litdata.StreamingDataset',
}
# Which template process (and so which imports) serves an implementation.
FAMILY = {'ours': 'ours', 'ref': 'ref', 'ref-local': 'ref', 'litdata': 'litdata'}


# ----------------------------------------------------------------------------- data


def make_samples(workload: str, n: int, seed: int) -> list[dict[str, Any]]:
    """Deterministic samples: the same (workload, n, seed) gives the same data in any process."""
    rng = np.random.default_rng(seed)
    if workload == 'tokens':
        tokens = rng.integers(0, 50257, size=(n, 2048), dtype=np.uint16)
        return [{'tokens': tokens[i].copy()} for i in range(n)]
    alphabet = np.frombuffer((string.ascii_letters + string.digits + ' ').encode(), np.uint8)
    text_lens = rng.integers(150, 251, size=n)  # ~200 B of ascii
    image_lens = rng.integers(6 << 10, (10 << 10) + 1, size=n)  # ~8 KiB of random bytes
    text_blob = alphabet[rng.integers(0, len(alphabet), size=int(text_lens.sum()),
                                      dtype=np.uint8)].tobytes()
    image_size = int(image_lens.sum())
    image_blob = rng.bit_generator.random_raw((image_size + 7) // 8).tobytes()[:image_size]
    labels = rng.integers(0, 1000, size=n)
    emb = rng.standard_normal(size=(n, 64), dtype=np.float32)
    samples = []
    t_at = i_at = 0
    for i in range(n):
        t_end, i_end = t_at + int(text_lens[i]), i_at + int(image_lens[i])
        samples.append({
            'id': i,
            'label': int(labels[i]),
            'text': text_blob[t_at:t_end].decode('ascii'),
            'image': image_blob[i_at:i_end],
            'emb': emb[i].copy(),
        })
        t_at, i_at = t_end, i_end
    return samples


def payload_bytes(workload: str, n: int, seed: int) -> int:
    """Raw sample payload: the bytes of every field's value (ints at their encoded width)."""
    if workload == 'tokens':
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
    return sum(p.stat().st_size for p in path.rglob('*')
               if p.is_file() and p.name != 'index.json')


def shard_files(path: Path) -> list[Path]:
    """The uncompressed shard/chunk files of a written dataset (not its index)."""
    return sorted(p for p in path.rglob('*') if p.is_file() and p.suffix in ('.mds', '.bin'))


# ----------------------------------------------------------------------------- measured code


def _proc_status_kb(field: str) -> int:
    match = re.search(rf'^{field}:\s+(\d+) kB', Path('/proc/self/status').read_text(), re.M)
    return int(match.group(1)) if match else 0


def reset_peak_rss() -> None:
    """Reset VmHWM (Linux >= 4.0), so the peak measured covers the timed section only."""
    try:
        Path('/proc/self/clear_refs').write_text('5')
    except OSError:
        pass  # then VmHWM also covers data generation and imports


def make_writer(spec: dict[str, Any], samples: list[dict[str, Any]]) -> Callable[[], None]:
    impl, out, columns = spec['impl'], spec['dir'], WORKLOAD_COLUMNS[spec['workload']]
    if impl in ('ours', 'ref'):
        if impl == 'ours':
            from mds_core import MDSWriter
        else:
            from streaming import MDSWriter

        def write() -> None:
            with MDSWriter(out=out, columns=columns, compression=spec['compression'],
                           hashes=spec['hashes'], size_limit=spec['size_limit']) as writer:
                for sample in samples:
                    writer.write(sample)

        return write

    from litdata.streaming.writer import BinaryWriter

    def write_litdata() -> None:
        writer = BinaryWriter(out, chunk_bytes=spec['size_limit'], compression=spec['compression'])
        for index, sample in enumerate(samples):
            writer.add_item(index, sample)
        writer.done()
        writer.merge()

    return write_litdata


def open_reader(impl: str, path: str, batch_size: int, mode: str) -> Any:
    if impl == 'ours':
        from mds_core import LocalDataset
        return LocalDataset(local=path)
    if impl == 'ref':
        from streaming import StreamingDataset
        return StreamingDataset(local=path, batch_size=batch_size)
    if impl == 'ref-local':
        from streaming import LocalDataset as RefLocalDataset
        return RefLocalDataset(local=path)
    import litdata
    if mode == 'random':
        # litdata's default batch_decode='auto' decodes a window of up to 256 rows per miss
        # (tuned for iteration); with random indices every access misses: per-item decode.
        return litdata.StreamingDataset(path, batch_decode=0)
    return litdata.StreamingDataset(path)


def iterate(impl: str, ds: Any) -> Iterator[dict[str, Any]]:
    if impl == 'ref-local':  # map-style only: no __iter__, walk the indices
        return (ds[i] for i in range(len(ds)))
    return iter(ds)


def pagecache_read(files: list[Path]) -> tuple[float, int]:
    """Seconds for one pass of large reads over warm files, and the bytes read."""
    sizes = [f.stat().st_size for f in files]
    view = memoryview(bytearray(max(sizes)))

    def read_all() -> None:
        for f, size in zip(files, sizes, strict=True):
            with open(f, 'rb', buffering=0) as fh:
                got = 0
                while got < size:
                    got += fh.readinto(view[got:size]) or size

    read_all()  # warm
    passes, t0 = 0, time.perf_counter()
    while True:  # whole passes for >= 0.3 s, so the rate is not timer noise
        read_all()
        passes += 1
        seconds = time.perf_counter() - t0
        if seconds >= 0.3:
            return seconds / passes, sum(sizes)


def import_family(family: str) -> None:
    """Import what a family's measurements use (so that no timed section imports)."""
    if family == 'ours':
        from mds_core import LocalDataset, MDSWriter  # noqa: F401
    elif family == 'ref':
        import streaming  # noqa: F401
    elif family == 'litdata':
        import litdata  # noqa: F401
        from litdata.streaming.writer import BinaryWriter  # noqa: F401


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement; runs in a fresh (forked) process."""
    op, impl, n = spec['op'], spec['impl'], spec['n']
    result: dict[str, Any] = {}
    samples: list[dict[str, Any]] = []
    if op == 'write':
        samples = make_samples(spec['workload'], n, spec['seed'])
        work = make_writer(spec, samples)
    elif op == 'read':
        import_family(FAMILY[impl])
        order = np.random.default_rng(spec['seed'] + 1).permutation(n).tolist()

    reset_peak_rss()
    rss0 = _proc_status_kb('VmRSS')
    t0 = time.perf_counter()
    if op == 'pagecache':
        seconds, result['bytes'] = pagecache_read(shard_files(Path(spec['dir'])))
    elif op == 'write':  # timed: construct + write every sample + finish
        work()
        seconds = time.perf_counter() - t0
    else:  # timed: open the dataset + read every sample once
        ds = open_reader(impl, spec['dir'], spec['batch_size'], spec['mode'])
        count, first, last = 0, None, None
        if spec['mode'] == 'random':
            for i in order:
                last = ds[i]
            count = len(order)
        else:
            for last in iterate(impl, ds):
                if first is None:
                    first = last
                count += 1
        seconds = time.perf_counter() - t0
    hwm = _proc_status_kb('VmHWM')
    result.update(seconds=seconds, peak_rss_mb=hwm / 1024, delta_rss_mb=(hwm - rss0) / 1024)

    if op == 'write':
        result['bytes'] = dir_bytes(Path(spec['dir']))
    elif op == 'read':  # not timed: did the reader return the right data?
        samples = make_samples(spec['workload'], n, spec['seed'])
        ok = count == n and len(ds) == n
        if spec['mode'] == 'in-order':
            ok = ok and same_sample(first, samples[0]) and same_sample(last, samples[-1])
        else:
            ok = ok and same_sample(last, samples[order[-1]])
        result['verified'] = bool(ok and all(same_sample(ds[i], samples[i]) for i in order[:32]))
        if impl == 'ref':
            result['shm_prefix'] = int(getattr(ds, '_shm_prefix_int', -1))
    return result


def reply_for(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return {'ok': True, 'result': measure(spec)}
    except BaseException:
        return {'ok': False, 'error': traceback.format_exc()}


def protocol_stdout() -> Any:
    """A private copy of stdout for replies; what libraries print goes to stderr."""
    protocol = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    return protocol


def serve(family: str) -> None:
    """Template process: import one library, then fork a fresh process per request.

    Protocol: one JSON spec per line on stdin, one JSON reply per line on stdout.
    """
    protocol = protocol_stdout()
    try:
        import_family(family)
    except Exception:  # the measurements will report the import error themselves
        traceback.print_exc()
    for line in sys.stdin:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the measuring process
            os.close(read_fd)
            reply = reply_for(json.loads(line))
            with os.fdopen(write_fd, 'w') as out:
                out.write(json.dumps(reply))
            atexit._run_exitfuncs()  # what a normal exit runs (e.g. the reference's shm cleanup)
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd) as inp:
            text = inp.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            text = json.dumps({'ok': False, 'error': f'measuring process died (status {status})'})
        protocol.write(text + '\n')
        protocol.flush()


# ----------------------------------------------------------------------------- parent side


class Bench:
    """Sends measurements to the template processes and keeps their results."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        (work / 'tmp').mkdir()
        # TMPDIR: the reference's lock files (and torch's, litdata's ...) land in our temp dir.
        self.env = dict(os.environ, TMPDIR=str(work / 'tmp'), PYTHONWARNINGS='ignore',
                        TOKENIZERS_PARALLELISM='false', LITDATA_DISABLE_VERSION_CHECK='1',
                        HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1')
        self.servers: dict[str, subprocess.Popen[str]] = {}
        self.results: dict[tuple, list[dict[str, Any]]] = {}
        self.errors: dict[tuple, str] = {}

    def server(self, family: str) -> subprocess.Popen[str]:
        if family not in self.servers:
            with open(self.work / f'server-{family}.log', 'w') as log:
                self.servers[family] = subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), '--_serve', family],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                    env=self.env, cwd=self.work)
        return self.servers[family]

    def close(self) -> None:
        for proc in self.servers.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        self.servers.clear()

    def measure(self, key: tuple, spec: dict[str, Any]) -> None:
        if key in self.errors:
            return  # failed before: don't retry every rep
        before = set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()
        if self.args.fresh_exec:  # a new interpreter per measurement, imports and all
            with open(self.work / 'measure.log', 'a') as log:
                done = subprocess.run([sys.executable, str(Path(__file__).resolve()),
                                       '--_measure', json.dumps(spec)], stdout=subprocess.PIPE,
                                      stderr=log, text=True, env=self.env, cwd=self.work)
            line = done.stdout
        else:
            proc = self.server('base' if spec['op'] == 'pagecache' else FAMILY[spec['impl']])
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(spec) + '\n')
            proc.stdin.flush()
            line = proc.stdout.readline()
        reply: dict[str, Any] = (json.loads(line) if line.strip() else
                                 {'ok': False, 'error': 'process died'})
        if not reply['ok']:
            self.errors[key] = reply['error'].strip().splitlines()[-1][:200]
            print(f'  FAILED {key}: {reply["error"]}', file=sys.stderr)
            return
        res = reply['result']
        self.results.setdefault(key, []).append(res)
        if res.get('verified') is False:
            print(f'  WRONG DATA {key}', file=sys.stderr)
        if res.get('shm_prefix', -1) >= 0:  # leftovers of that (finished) process only
            self._unlink_shm(f"{res['shm_prefix']:06d}_", before)
        print(f"  {key} {res['seconds']:.3f}s peak {res['peak_rss_mb']:.0f}MB", file=sys.stderr)

    @staticmethod
    def _unlink_shm(prefix: str, before: set[str]) -> None:
        for name in os.listdir('/dev/shm'):
            if name.startswith(prefix) and name not in before:
                try:
                    os.unlink(os.path.join('/dev/shm', name))
                except OSError:
                    pass

    def med(self, key: tuple, field: str) -> float | None:
        vals = [r[field] for r in self.results.get(key, []) if field in r]
        return statistics.median(vals) if vals else None


def compare_shards(ours: Path, ref: Path) -> str:
    """How mds_core's shard files compare with the reference writer's (index.json aside)."""
    names = sorted(p.name for p in ref.iterdir() if p.name != 'index.json')
    if names != sorted(p.name for p in ours.iterdir() if p.name != 'index.json'):
        return '**shard file names differ from ref**'
    if all((ours / nm).read_bytes() == (ref / nm).read_bytes() for nm in names):
        return 'shards byte-identical to ref'
    if all(nm.endswith('.zstd') for nm in names):
        import io

        import zstandard

        def unzstd(path: Path) -> bytes:  # all frames (a writer may emit several)
            return zstandard.ZstdDecompressor().stream_reader(
                io.BytesIO(path.read_bytes()), read_across_frames=True).read()

        if all(unzstd(ours / nm) == unzstd(ref / nm) for nm in names):
            return 'zstd bytes differ from ref; decompressed shards identical'
    return '**shards differ from ref**'


def run_workload(bench: Bench, workload: str, n: int, have_ours: bool) -> dict[str, Any]:
    """Writes, page-cache reads and reads for one workload; reps interleaved."""
    args, base = bench.args, bench.work / workload
    base.mkdir()
    common = dict(workload=workload, n=n, seed=args.seed, hashes=args.hashes,
                  size_limit=args.size_limit, batch_size=args.batch_size)
    writers = [w for w in WRITERS if w != 'ours' or have_ours]
    readers = [r for r in READERS if r != 'ours' or have_ours]

    def data_dir(writer: str, comp: str | None) -> Path:
        return base / f'data-{writer}-{comp or "none"}'

    print(f'[{workload}] n={n}: writers', file=sys.stderr)
    for rep in range(args.reps):
        for comp in COMPRESSIONS:
            for writer in writers:
                out = data_dir(writer, comp) if rep == 0 else base / 'scratch-write'
                bench.measure((workload, 'write', writer, comp),
                              dict(common, op='write', impl=writer, compression=comp,
                                   dir=str(out)))
                if rep > 0:
                    shutil.rmtree(out, ignore_errors=True)

    shards = {comp: compare_shards(data_dir('ours', comp), data_dir('ref', comp))
              for comp in COMPRESSIONS
              if data_dir('ours', comp).is_dir() and data_dir('ref', comp).is_dir()}

    print(f'[{workload}] page cache + readers', file=sys.stderr)
    scratch = base / 'scratch-read'
    for _rep in range(args.reps):
        for writer in ('ref', 'litdata'):
            if data_dir(writer, None).is_dir():
                bench.measure((workload, 'pagecache', writer, None),
                              dict(common, op='pagecache', impl=writer,
                                   dir=str(data_dir(writer, None))))
        for comp in COMPRESSIONS:
            for reader in readers:
                src = data_dir('litdata' if reader == 'litdata' else 'ref', comp)
                if not src.is_dir() or (reader == 'ref-local' and comp is not None):
                    continue  # (streaming.LocalDataset never decompresses: nothing to measure)
                for mode in MODES:
                    # Fresh copy per measurement: the reference decompresses shards next to
                    # the .zstd files, which must not leak into the next measurement.
                    shutil.copytree(src, scratch)
                    bench.measure((workload, 'read', reader, comp, mode),
                                  dict(common, op='read', impl=reader, compression=comp,
                                       mode=mode, dir=str(scratch)))
                    shutil.rmtree(scratch, ignore_errors=True)
    info = {'shards': shards, 'uncompressed_bytes': {
        w: dir_bytes(data_dir(w, None)) for w in ('ref', 'litdata') if data_dir(w, None).is_dir()}}
    shutil.rmtree(base, ignore_errors=True)  # free the disk early
    return info


# ----------------------------------------------------------------------------- report


def fmt(value: float | None, digits: int = 0) -> str:
    return '—' if value is None else f'{value:,.{digits}f}'


def ratio(a: float | None, b: float | None) -> str:
    return '—' if a is None or b in (None, 0) else f'{a / b:.2f}×'


def workload_table(bench: Bench, workload: str, n: int, info: dict[str, Any],
                   have_ours: bool) -> list[str]:
    payload_mb = payload_bytes(workload, n, bench.args.seed) / 1e6
    lines = [
        f'### `{workload}`: {n:,} samples, {payload_mb:,.1f} MB of raw payload',
        '',
        '| operation | implementation | compression | samples/s | payload MB/s | shard MB | '
        'peak RSS MB | Δ RSS MB | speed vs ref | peak RSS vs ref | in-order % of page cache '
        '| note |',
        '|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|',
    ]

    def row(op: str, impl: str, key: tuple, ref_key: tuple, comp: str | None,
            pc_writer: str | None, note: str) -> None:
        secs, ref_secs = bench.med(key, 'seconds'), bench.med(ref_key, 'seconds')
        rss, ref_rss = bench.med(key, 'peak_rss_mb'), bench.med(ref_key, 'peak_rss_mb')
        sps = n / secs if secs else None
        shard_mb = bench.med(key, 'bytes') if op == 'write' else None
        pct = '—'
        if pc_writer and secs:
            pc_secs = bench.med((workload, 'pagecache', pc_writer, None), 'seconds')
            if pc_secs:  # same bytes, so the ratio of rates is the ratio of times
                pct = f'{100 * pc_secs / secs:.1f}%'
        notes = [note] if note else []
        if key in bench.errors:
            notes.append(f'error: {bench.errors[key]}')
        if any(r.get('verified') is False for r in bench.results.get(key, [])):
            notes.append('**returned wrong data**')
        lines.append(
            f'| {op} | {LABELS[(op.split()[0], impl)]} | {comp or "none"} | {fmt(sps)} '
            f'| {fmt(payload_mb / secs if secs else None, 1)} '
            f'| {fmt(shard_mb / 1e6 if shard_mb else None, 1)} | {fmt(rss)} '
            f'| {fmt(bench.med(key, "delta_rss_mb"))} '
            f'| {ratio(sps, n / ref_secs if ref_secs else None)} | {ratio(rss, ref_rss)} '
            f'| {pct} | {"; ".join(notes)} |')

    for comp in COMPRESSIONS:
        for writer in WRITERS:
            note = ''
            if writer == 'ours':
                note = info['shards'].get(comp, '') if have_ours else 'skipped: no mds_core'
            row('write', writer, (workload, 'write', writer, comp),
                (workload, 'write', 'ref', comp), comp, None, note)
    for writer in ('ref', 'litdata'):
        key = (workload, 'pagecache', writer, None)
        secs, size = bench.med(key, 'seconds'), info['uncompressed_bytes'].get(writer)
        lines.append(
            f'| page-cache read | {"MDS" if writer == "ref" else "litdata"} shard files | none '
            f'| {fmt(n / secs if secs else None)} '
            f'| {fmt(size / 1e6 / secs if secs and size else None, 1)} (shard bytes) '
            f'| {fmt(size / 1e6 if size else None, 1)} | {fmt(bench.med(key, "peak_rss_mb"))} '
            f'| {fmt(bench.med(key, "delta_rss_mb"))} | — | — | 100% '
            f'| large readinto of every file, warm |')
    for mode in MODES:
        for comp in COMPRESSIONS:
            for reader in READERS:
                note = ''
                if reader == 'ours' and not have_ours:
                    note = 'skipped: no mds_core'
                elif reader == 'ref-local' and comp is not None:
                    note = 'n/a: streaming.LocalDataset does not decompress shards'
                elif reader == 'ref-local' and mode == 'in-order':
                    note = 'ds[i] for i in range(len(ds)) (map-style only)'
                elif reader == 'ref' and mode == 'in-order':
                    note = 'single-process `for s in ds` (its prepare/ready threads run)'
                elif reader == 'litdata' and mode == 'random':
                    note = 'batch_decode=0 (per-item decode)'
                if reader == 'ref' and comp is not None:
                    note = (note + '; ' if note else '') + 'includes unpacking shards to disk'
                pc = ('litdata' if reader == 'litdata' else 'ref') if mode == 'in-order' else None
                row(f'read {mode}', reader, (workload, 'read', reader, comp, mode),
                    (workload, 'read', 'ref', comp, mode), comp, pc, note)
    return lines


def versions() -> dict[str, str]:
    from importlib import metadata
    out = {'python': platform.python_version(), 'numpy': np.__version__}
    for dist in ('mosaicml-streaming', 'litdata', 'torch', 'mds-pipelines'):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = 'not installed'
    return out


def report(bench: Bench, sizes: dict[str, int], infos: dict[str, dict[str, Any]],
           have_ours: bool, ours_error: str, wall: float) -> str:
    args, ver = bench.args, versions()
    cmd = shlex.join([os.path.relpath(sys.executable)] + sys.argv)
    lines = [
        '# MDS format benchmark: mds_core vs mosaicml-streaming vs litdata',
        '',
        f'- command: `{cmd}`',
        f'- date: {time.strftime("%Y-%m-%d %H:%M:%S %Z")}; wall time {wall:.0f} s',
        f'- machine: nproc {len(os.sched_getaffinity(0))}, {platform.machine()}, '
        f'{platform.system()} {platform.release()}; python {ver["python"]}, '
        f'numpy {ver["numpy"]}, torch {ver["torch"]}',
        f'- mosaicml-streaming {ver["mosaicml-streaming"]}, litdata {ver["litdata"]}, '
        f'mds_core (mds-pipelines) {ver["mds-pipelines"]}'
        + ('' if have_ours else f' — **ours skipped: {ours_error}**'),
        f'- settings: reps={args.reps} (median shown), size_limit={args.size_limit:,} B '
        f'(also litdata chunk_bytes), hashes={",".join(args.hashes) or "none"}, '
        f'StreamingDataset batch_size={args.batch_size}, seed={args.seed}',
        '',
        'How to read it:',
        '- Each cell is the median over reps; each rep ran in its own fresh process'
        + (' (a new interpreter). ' if args.fresh_exec else
           ', forked from a template process that had only imported that library. ')
        + 'Timed: writers = construct + '
        'write every sample + finish; readers = open the dataset + read every sample once '
        '(random: one fixed permutation of all indices, the same for every reader; in-order: '
        'iteration).',
        '- Data: random ascii text and random bytes/arrays, so zstd barely compresses it.',
        '- payload MB/s counts raw sample payload (field values: ints at encoded width, str '
        'bytes, bytes, array bytes), the same numerator for every row; shard MB is on disk. '
        'The page-cache rows count shard-file bytes.',
        '- MDS readers (ours, reference StreamingDataset, reference LocalDataset) all read the '
        "reference writer's shards; litdata reads its own chunks. Reads are warm "
        '(the data was just copied, so it is in the page cache).',
        '- "in-order % of page cache" = time to read the uncompressed shard files of the same '
        'format from the page cache / the reader\'s in-order time (zstd rows too).',
        '- peak RSS = VmHWM of the measuring process, reset at the start of the timed section '
        '(includes the interpreter, the imports and, for writers, the in-memory input samples); '
        'Δ RSS = peak minus RSS at the start of the timed section. '
        + ('Each measurement ran in a newly started interpreter (--fresh-exec).'
           if args.fresh_exec else
           'Forked processes do not count the library code pages they never touch, so peak '
           'RSS sits below a cold interpreter\'s (--fresh-exec measures that way); '
           'Δ RSS is the same either way.'),
        '- "vs ref": ratio to the reference row of the same operation/mode/compression '
        '(writers: streaming.MDSWriter; readers: streaming.StreamingDataset). Speed > 1 '
        'is faster than the reference; peak RSS < 1 is smaller.',
        '',
    ]
    for workload, n in sizes.items():
        lines += workload_table(bench, workload, n, infos[workload], have_ours) + ['']
    return '\n'.join(lines)


def clean_reference_shm() -> None:
    """The reference's own cleanup of leaked /dev/shm segments (run before and after).

    It unlinks the streaming segments of *any* process on this machine, so don't run the
    benchmark while something else uses streaming.StreamingDataset.
    """
    try:
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()
    except Exception as exc:  # cleanup must not fail the run
        print(f'clean_stale_shared_memory failed: {exc}', file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--mixed', type=int, default=10_000, help='samples in "mixed" (0: skip)')
    parser.add_argument('--tokens', type=int, default=10_000, help='samples in "tokens" (0: skip)')
    parser.add_argument('--reps', type=int, default=3, help='repetitions of each measurement')
    parser.add_argument('--quick', action='store_true', help='smoke run: 300 samples each, 1 rep')
    parser.add_argument('--size-limit', type=int, default=1 << 26,
                        help='shard size limit in bytes (MDS size_limit, litdata chunk_bytes)')
    parser.add_argument('--hashes', default='', help='comma list of MDS hashes, e.g. sha1,xxh64')
    parser.add_argument('--batch-size', type=int, default=64,
                        help='batch_size for streaming.StreamingDataset')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', default=str(HERE / 'results-latest.md'),
                        help='markdown output file')
    parser.add_argument('--fresh-exec', action='store_true',
                        help='start a new interpreter per measurement instead of forking one '
                             'that has the library imported (slow: pays 2-8 s of imports each)')
    parser.add_argument('--_serve', help=argparse.SUPPRESS)
    parser.add_argument('--_measure', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._serve:
        serve(args._serve)
        return 0
    if args._measure:
        protocol = protocol_stdout()
        protocol.write(json.dumps(reply_for(json.loads(args._measure))) + '\n')
        protocol.close()
        return 0

    if args.quick:
        args.mixed, args.tokens, args.reps = min(args.mixed, 300), min(args.tokens, 300), 1
    args.hashes = [h for h in args.hashes.split(',') if h]
    sizes = {w: n for w, n in (('mixed', args.mixed), ('tokens', args.tokens)) if n > 0}

    # -P: no cwd on sys.path, so the probe sees what the template processes see.
    probe = subprocess.run([sys.executable, '-P', '-c',
                            'from mds_core import MDSWriter, LocalDataset'],
                           capture_output=True, text=True)
    have_ours = probe.returncode == 0
    ours_error = '' if have_ours else (probe.stderr.strip().splitlines() or ['?'])[-1]
    if not have_ours:
        print(f'NOTE: mds_core rows skipped ({ours_error})', file=sys.stderr)

    t0 = time.perf_counter()
    clean_reference_shm()
    with tempfile.TemporaryDirectory(prefix='mds-bench-') as tmp:
        bench = Bench(args, Path(tmp))
        try:
            infos = {w: run_workload(bench, w, n, have_ours) for w, n in sizes.items()}
        finally:
            bench.close()
            clean_reference_shm()
    text = report(bench, sizes, infos, have_ours, ours_error, time.perf_counter() - t0)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + '\n')
    print(f'\nwritten to {args.out}', file=sys.stderr)
    return 1 if bench.errors else 0


if __name__ == '__main__':
    sys.exit(main())
