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

Every measurement runs in a fresh subprocess (so its peak RSS is its own), ``--reps`` times,
interleaved; the table shows medians. Run with the benchmark venv::

    benchmarks/.venv/bin/python benchmarks/bench_format.py            # full (a few minutes)
    benchmarks/.venv/bin/python benchmarks/bench_format.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
RESULT_TAG = '@@BENCH_RESULT '

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
COMPRESSIONS: list[Optional[str]] = [None, 'zstd']
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
    text_blob = alphabet[rng.integers(0, len(alphabet), size=int(text_lens.sum()))].tobytes()
    image_blob = rng.bytes(int(image_lens.sum()))
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


def same_sample(got: dict[str, Any], want: dict[str, Any]) -> bool:
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


# ----------------------------------------------------------------------------- child side


def _proc_status_kb(field: str) -> int:
    match = re.search(rf'^{field}:\s+(\d+) kB', Path('/proc/self/status').read_text(), re.M)
    return int(match.group(1)) if match else 0


def reset_peak_rss() -> None:
    """Reset VmHWM (Linux >= 4.0), so the peak measured covers the timed section only."""
    try:
        Path('/proc/self/clear_refs').write_text('5')
    except OSError:
        pass  # then VmHWM also covers data generation and imports


def dir_bytes(path: str) -> int:
    """Bytes of every file of a written dataset except its index."""
    return sum(p.stat().st_size for p in Path(path).rglob('*')
               if p.is_file() and p.name != 'index.json')


def shard_files(path: str) -> list[Path]:
    """The uncompressed shard/chunk files of a written dataset (not its index)."""
    return sorted(p for p in Path(path).rglob('*') if p.is_file() and p.suffix in ('.mds', '.bin'))


def run_write(spec: dict[str, Any], samples: list[dict[str, Any]]) -> Callable[[], Any]:
    impl, out, columns = spec['impl'], spec['dir'], WORKLOAD_COLUMNS[spec['workload']]
    kwargs = dict(out=out, columns=columns, compression=spec['compression'],
                  hashes=spec['hashes'], size_limit=spec['size_limit'])
    if impl in ('ours', 'ref'):
        if impl == 'ours':
            from mds_core import MDSWriter
        else:
            from streaming import MDSWriter

        def write() -> None:
            with MDSWriter(**kwargs) as writer:
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


def import_reader(impl: str) -> None:
    if impl == 'ours':
        import mds_core  # noqa: F401
    elif impl == 'litdata':
        import litdata  # noqa: F401
    else:
        import streaming  # noqa: F401


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


def child_main(spec: dict[str, Any]) -> dict[str, Any]:
    op, impl, n = spec['op'], spec['impl'], spec['n']
    result: dict[str, Any] = {}
    if op == 'pagecache':
        files = shard_files(spec['dir'])
        sizes = [f.stat().st_size for f in files]
        buf = bytearray(max(sizes))
        view = memoryview(buf)

        def read_all() -> None:
            for f, size in zip(files, sizes):
                with open(f, 'rb', buffering=0) as fh:
                    got = 0
                    while got < size:
                        got += fh.readinto(view[got:size]) or size

        read_all()  # warm
        reset_peak_rss()
        rss0 = _proc_status_kb('VmRSS')
        passes, t0 = 0, time.perf_counter()
        while True:  # repeat whole passes for >= 0.3 s so the rate is not timer noise
            read_all()
            passes += 1
            seconds = time.perf_counter() - t0
            if seconds >= 0.3:
                break
        result.update(seconds=seconds / passes, bytes=sum(sizes))
    elif op == 'write':
        samples = make_samples(spec['workload'], n, spec['seed'])
        work = run_write(spec, samples)  # imports happen here, outside the timing
        reset_peak_rss()
        rss0 = _proc_status_kb('VmRSS')
        t0 = time.perf_counter()
        work()
        result['seconds'] = time.perf_counter() - t0
        result['bytes'] = dir_bytes(spec['dir'])
    else:  # read
        import_reader(impl)  # imports stay outside the timing
        order = np.random.default_rng(spec['seed'] + 1).permutation(n).tolist()
        reset_peak_rss()
        rss0 = _proc_status_kb('VmRSS')
        t0 = time.perf_counter()  # timed: open the dataset + read every sample once
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
        result['seconds'] = time.perf_counter() - t0
        # Not timed: check the reader returned the right data.
        samples = make_samples(spec['workload'], n, spec['seed'])
        ok = count == n and len(ds) == n
        if spec['mode'] == 'in-order':
            ok = ok and same_sample(first, samples[0]) and same_sample(last, samples[-1])
        else:
            ok = ok and same_sample(last, samples[order[-1]])
        ok = ok and all(same_sample(ds[i], samples[i]) for i in order[:32])
        result['verified'] = bool(ok)
        if impl == 'ref':
            result['shm_prefix'] = int(getattr(ds, '_shm_prefix_int', -1))
        del ds
    result['peak_rss_mb'] = _proc_status_kb('VmHWM') / 1024
    result['delta_rss_mb'] = (_proc_status_kb('VmHWM') - rss0) / 1024
    return result


# ----------------------------------------------------------------------------- parent side


class Bench:
    """Runs child measurements and keeps their results."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        # TMPDIR: the reference's /tmp lock files (and anything else) land in our temp dir.
        self.env = dict(os.environ, TMPDIR=str(work / 'tmp'), PYTHONWARNINGS='ignore',
                        TOKENIZERS_PARALLELISM='false', LITDATA_DISABLE_VERSION_CHECK='1',
                        HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1')
        (work / 'tmp').mkdir()
        self.results: dict[tuple, list[dict[str, Any]]] = {}
        self.errors: dict[tuple, str] = {}

    def measure(self, key: tuple, spec: dict[str, Any]) -> None:
        if key in self.errors:
            return  # failed before: don't retry every rep
        before = set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()
        proc = subprocess.run([sys.executable, __file__, '--_child', json.dumps(spec)],
                              capture_output=True, text=True, env=self.env)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ['(no output)'])[-1]
            self.errors[key] = f'exit {proc.returncode}: {tail[:160]}'
            print(f'  FAILED {key}: {self.errors[key]}', file=sys.stderr)
        else:
            res = json.loads(lines[-1][len(RESULT_TAG):])
            self.results.setdefault(key, []).append(res)
            if res.get('verified') is False:
                print(f'  WRONG DATA {key}', file=sys.stderr)
            if res.get('shm_prefix', -1) >= 0:  # reference leftovers of this (dead) child only
                self._unlink_shm(f"{res['shm_prefix']:06d}_", before)
        print(f'  {key} {self._fmt_last(key)}', file=sys.stderr)

    @staticmethod
    def _unlink_shm(prefix: str, before: set[str]) -> None:
        for name in os.listdir('/dev/shm'):
            if name.startswith(prefix) and name not in before:
                try:
                    os.unlink(os.path.join('/dev/shm', name))
                except OSError:
                    pass

    def _fmt_last(self, key: tuple) -> str:
        if key in self.errors or key not in self.results:
            return ''
        r = self.results[key][-1]
        return f"{r['seconds']:.3f}s rss {r['peak_rss_mb']:.0f}MB"

    def med(self, key: tuple, field: str) -> Optional[float]:
        vals = [r[field] for r in self.results.get(key, []) if field in r]
        return statistics.median(vals) if vals else None


def run_workload(bench: Bench, workload: str, n: int, have_ours: bool) -> dict[str, Any]:
    """Writes, page-cache reads and reads for one workload; reps interleaved."""
    args, base = bench.args, bench.work / workload
    common = dict(workload=workload, n=n, seed=args.seed, hashes=args.hashes,
                  size_limit=args.size_limit, batch_size=args.batch_size)
    writers = [w for w in WRITERS if w != 'ours' or have_ours]
    readers = [r for r in READERS if r != 'ours' or have_ours]

    def data_dir(writer: str, comp: Optional[str]) -> Path:
        return base / f'data-{writer}-{comp or "none"}'

    print(f'[{workload}] n={n}: writers', file=sys.stderr)
    for rep in range(args.reps):
        for comp in COMPRESSIONS:
            for writer in writers:
                out = data_dir(writer, comp) if rep == 0 else base / 'scratch-write'
                bench.measure((workload, 'write', writer, comp), dict(common, op='write', impl=writer,
                                                             compression=comp, dir=str(out)))
                if rep > 0:
                    shutil.rmtree(out, ignore_errors=True)

    identical: dict[Optional[str], Optional[bool]] = {}
    for comp in COMPRESSIONS:
        if have_ours and data_dir('ours', comp).is_dir() and data_dir('ref', comp).is_dir():
            ours, ref = data_dir('ours', comp), data_dir('ref', comp)
            names = sorted(p.name for p in ref.iterdir() if p.name != 'index.json')
            identical[comp] = (names == sorted(p.name for p in ours.iterdir()
                                               if p.name != 'index.json') and
                               all((ours / nm).read_bytes() == (ref / nm).read_bytes()
                                   for nm in names))

    print(f'[{workload}] page cache + readers', file=sys.stderr)
    scratch = base / 'scratch-read'
    for rep in range(args.reps):
        for writer in ('ref', 'litdata'):
            if data_dir(writer, None).is_dir():
                bench.measure((workload, 'pagecache', writer, None),
                              dict(common, op='pagecache', impl=writer,
                                   dir=str(data_dir(writer, None))))
        for comp in COMPRESSIONS:
            for reader in readers:
                src = data_dir('litdata' if reader == 'litdata' else 'ref', comp)
                if not src.is_dir():
                    continue
                if reader == 'ref-local' and comp is not None:
                    continue  # streaming.LocalDataset never decompresses: nothing to measure
                for mode in MODES:
                    # Fresh copy per measurement: the reference decompresses shards next to
                    # the .zstd files, which must not leak into the next measurement.
                    shutil.copytree(src, scratch)
                    bench.measure((workload, 'read', reader, comp, mode),
                                  dict(common, op='read', impl=reader, compression=comp,
                                       mode=mode, dir=str(scratch)))
                    shutil.rmtree(scratch, ignore_errors=True)
    return {'identical': identical, 'uncompressed_bytes': {
        w: dir_bytes(str(data_dir(w, None))) for w in ('ref', 'litdata')
        if data_dir(w, None).is_dir()}}


# ----------------------------------------------------------------------------- report


def fmt(value: Optional[float], digits: int = 0) -> str:
    return '—' if value is None else f'{value:,.{digits}f}'


def ratio(a: Optional[float], b: Optional[float]) -> str:
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

    def row(op: str, impl: str, key: tuple, ref_key: tuple, comp: Optional[str],
            pc_writer: Optional[str], note: str = '') -> None:
        secs, ref_secs = bench.med(key, 'seconds'), bench.med(ref_key, 'seconds')
        rss, ref_rss = bench.med(key, 'peak_rss_mb'), bench.med(ref_key, 'peak_rss_mb')
        sps = n / secs if secs else None
        ref_sps = n / ref_secs if ref_secs else None
        shard_mb = bench.med(key, 'bytes')
        pct = '—'
        pc_secs = bench.med((workload, 'pagecache', pc_writer, None), 'seconds') if pc_writer else None
        if pc_secs and secs:
            pct = f'{100 * pc_secs / secs:.1f}%'  # same bytes: rate ratio = time ratio
        if key in bench.errors:
            note = (note + ' ' if note else '') + f'error: {bench.errors[key]}'
        if any(r.get('verified') is False for r in bench.results.get(key, [])):
            note = (note + ' ' if note else '') + '**returned wrong data**'
        lines.append(
            f'| {op} | {LABELS.get((op.split()[0], impl), impl)} | {comp or "none"} | {fmt(sps)} '
            f'| {fmt(payload_mb / secs if secs else None, 1)} '
            f'| {fmt(shard_mb / 1e6 if shard_mb and op == "write" else None, 1)} | {fmt(rss)} '
            f'| {fmt(bench.med(key, "delta_rss_mb"))} | {ratio(sps, ref_sps)} '
            f'| {ratio(rss, ref_rss)} | {pct} | {note} |')

    for comp in COMPRESSIONS:
        for writer in WRITERS:
            note = ''
            if writer == 'ours' and not have_ours:
                note = 'skipped: mds_core not importable'
            elif writer == 'ours' and comp in info['identical']:
                same = info['identical'][comp]
                note = 'shards byte-identical to ref' if same else '**shards differ from ref**'
            row('write', writer, (workload, 'write', writer, comp), (workload, 'write', 'ref', comp),
                comp, None, note)
    for writer in ('ref', 'litdata'):
        key = (workload, 'pagecache', writer, None)
        secs, size = bench.med(key, 'seconds'), info['uncompressed_bytes'].get(writer)
        lines.append(
            f'| page-cache read | {"MDS" if writer == "ref" else "litdata"} shard files | none '
            f'| {fmt(n / secs if secs else None)} | {fmt(size / 1e6 / secs if secs else None, 1)} '
            f'(shard bytes) | {fmt(size / 1e6 if size else None, 1)} '
            f'| {fmt(bench.med(key, "peak_rss_mb"))} | {fmt(bench.med(key, "delta_rss_mb"))} '
            f'| — | — | 100% | large readinto of every file, warm |')
    for mode in MODES:
        for comp in COMPRESSIONS:
            for reader in READERS:
                note = ''
                if reader == 'ours' and not have_ours:
                    note = 'skipped: mds_core not importable'
                elif reader == 'ref-local' and comp is not None:
                    note = 'n/a: streaming.LocalDataset does not decompress shards'
                elif reader == 'ref-local' and mode == 'in-order':
                    note = 'ds[i] for i in range(len(ds)) (map-style only)'
                elif reader == 'ref' and comp is not None:
                    note = 'includes decompressing shards to disk'
                elif reader == 'litdata' and mode == 'random':
                    note = 'batch_decode=0 (per-item decode)'
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
        f'- machine: {os.cpu_count()} CPUs (nproc), {platform.machine()}, '
        f'{platform.system()} {platform.release()}; python {ver["python"]}, '
        f'numpy {ver["numpy"]}, torch {ver["torch"]}',
        f'- mosaicml-streaming {ver["mosaicml-streaming"]}, litdata {ver["litdata"]}, '
        f'mds_core (mds-pipelines) {ver["mds-pipelines"]}'
        + ('' if have_ours else f' — **ours skipped: {ours_error}**'),
        f'- settings: reps={args.reps} (median shown), size_limit={args.size_limit:,} B '
        f'(also litdata chunk_bytes), hashes={args.hashes or "none"}, '
        f'StreamingDataset batch_size={args.batch_size}, seed={args.seed}',
        '',
        'How to read it:',
        '- Each cell is the median over reps of a measurement run in its own fresh '
        'subprocess. Timed: writers = construct + write every sample + finish; readers = open '
        'the dataset + read every sample once (random: one fixed permutation of all indices, '
        'the same for every reader; in-order: iteration).',
        '- payload MB/s counts raw sample payload (field values: ints at encoded width, str '
        'bytes, bytes, array bytes), the same numerator for every row; shard MB is on disk. '
        'The page-cache rows count shard-file bytes.',
        '- MDS readers (ours, reference StreamingDataset, reference LocalDataset) all read the '
        "reference writer's shards; litdata reads its own chunks. Reads are warm "
        '(the data was just copied, so it is in the page cache).',
        '- "in-order % of page cache" = time to read the uncompressed shard files of the same '
        'format from the page cache / the reader\'s in-order time (for zstd rows too).',
        '- peak RSS = VmHWM of the measuring process, reset just before the timed section '
        '(includes the interpreter, imports and, for writers, the in-memory input samples); '
        'Δ RSS = peak minus RSS at the start of the timed section.',
        '- "vs ref": ratio to the reference row of the same operation/mode/compression '
        '(writers: streaming.MDSWriter; readers: streaming.StreamingDataset). Speed > 1 '
        'is faster than the reference; peak RSS < 1 is smaller.',
        '',
    ]
    for workload, n in sizes.items():
        lines += workload_table(bench, workload, n, infos[workload], have_ours) + ['']
    return '\n'.join(lines)


def clean_reference_shm() -> None:
    """The reference's own cleanup of leaked /dev/shm segments (run before and after)."""
    try:
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()
    except Exception as exc:  # pragma: no cover - cleanup must not fail the run
        print(f'clean_stale_shared_memory failed: {exc}', file=sys.stderr)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--mixed', type=int, default=20_000, help='samples in "mixed" (0: skip)')
    parser.add_argument('--tokens', type=int, default=20_000, help='samples in "tokens" (0: skip)')
    parser.add_argument('--reps', type=int, default=3, help='repetitions of each measurement')
    parser.add_argument('--quick', action='store_true',
                        help='smoke run: 500 samples each, 1 rep')
    parser.add_argument('--size-limit', type=int, default=1 << 26,
                        help='shard size limit in bytes (MDS size_limit, litdata chunk_bytes)')
    parser.add_argument('--hashes', default='', help='comma list of MDS hashes, e.g. sha1,xxh64')
    parser.add_argument('--batch-size', type=int, default=64,
                        help='batch_size for streaming.StreamingDataset')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', default=str(HERE / 'results-latest.md'),
                        help='markdown output file')
    parser.add_argument('--_child', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._child:
        print(RESULT_TAG + json.dumps(child_main(json.loads(args._child))), flush=True)
        return 0

    if args.quick:
        args.mixed, args.tokens, args.reps = min(args.mixed, 500), min(args.tokens, 500), 1
    args.hashes = [h for h in args.hashes.split(',') if h]
    sizes = {w: n for w, n in (('mixed', args.mixed), ('tokens', args.tokens)) if n > 0}

    # -P: no cwd on sys.path, so the probe sees what the children (run as a script) see.
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
        infos = {}
        try:
            for workload, n in sizes.items():
                (bench.work / workload).mkdir()
                infos[workload] = run_workload(bench, workload, n, have_ours)
                shutil.rmtree(bench.work / workload, ignore_errors=True)  # free disk early
        finally:
            clean_reference_shm()
    text = report(bench, sizes, infos, have_ours, ours_error, time.perf_counter() - t0)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + '\n')
    print(f'\nwritten to {args.out}', file=sys.stderr)
    return 1 if bench.errors else 0


if __name__ == '__main__':
    sys.exit(main())
