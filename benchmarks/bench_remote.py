#!/usr/bin/env python3
"""Remote streaming benchmark: mds_core vs mosaicml-streaming 0.13 vs litdata, from object stores on loopback.

The data set is the ``mixed`` workload (int64 ``id``, int32 ``label``, ~200 B ``str``, ~8 KiB ``bytes``,
``ndarray:float32:64``; ~9 KB a sample), written once as MDS (``mds_core.MDSWriter``, read by
mds_core and the reference) and once by litdata's ``BinaryWriter`` (read by litdata), both with
``--size-limit`` shards and ``--compression`` (zstd; ``none`` for uncompressed shards, whose first
batch mds_core reads by byte ranges), and uploaded to each store:

* ``s3``: the tests' moto server (``testsupport/s3.py``), read through botocore (ours), boto3 (the reference)
  and boto3 + obstore (litdata);
* ``gcs``: the tests' fake-gcs-server (``testsupport/emulators.py``), read through gcsfs (ours). The peers'
  GCS client (google-cloud-storage) is not in ``benchmarks/.venv``: only ours and the plain
  downloader run there.

Between every client and the store sits ``benchmarks/netproxy.py``: it adds ``latency`` to each
response's first byte (and a round trip to each new connection), optionally caps the node's download
rate, records every request (GET of an object, HEAD, listing) with its timing, and reports its own CPU.

Measured, each in a fresh process forked from a template that has imported torch and one library's
``StreamingDataset`` and ``StreamingDataLoader`` and nothing else (those imports are not timed; a store
client the library imports lazily, and building it, are), each with an empty cache directory unless
said otherwise:

1. ``first``: construction → first sample, no workers (``next(iter(dataset))``, consumed);
2. ``first-loader``: construction → first batch of the library's ``StreamingDataLoader`` (2 workers);
3. ``epoch``: construction + one cold epoch, no workers, every sample consumed;
4. ``loader``: construction + a cold epoch through the loader, then ``WARM_EPOCHS`` more epochs of the
   same loader (every shard cached): the first one's first batch, and their mean epoch;
5. ``resume``: construction + ``load_state_dict`` (taken by the library's own loader at 50% of an
   epoch) + the first batch, with an empty cache (a restart elsewhere) and with every shard cached;
   on S3 also mds_core reading the same shards as version 1 of a versioned shard set
   (``version=1``), every shard cached: a pinned version's cached index needs no request;
6. ``plain``: the physical limit: every MDS shard fetched by ``--plain-threads`` threads of raw HTTP
   GETs (presigned for S3) into files, over the same proxy: no library at all.

Every sample or batch goes through ``harness.Consumer``. The report gives medians of ``--reps``
(interleaved), ratios of medians with the per-rep range, requests per shard (at the proxy), mean
shard GETs in flight while any is, bytes downloaded, and CPU seconds of the client (process and reaped
workers), the store's server and the proxy. Run it with the project's environment (it starts the
servers; the reference and litdata run in ``benchmarks/.venv``)::

    bash benchmarks/setup_env.sh
    .venv/bin/python benchmarks/bench_remote.py              # full (about half an hour)
    .venv/bin/python benchmarks/bench_remote.py --quick      # smoke run (~3 min)
    .venv/bin/python benchmarks/bench_remote.py --stores s3 --networks 25 --impls ours   # ours alone
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import bench_format as bf
import bench_streaming as bs
import harness
import netproxy

IMPLS = ["ref", "litdata", "ours"]
LABELS = {"ours": "mds_core", "ref": "Mosaic 0.13", "litdata": "LitData"}
PINNED = "ours-pinned"  # mds_core on version 1 of a shard set holding the same shards (resume, warm cache)
SHARD_SET = "ours-set"  # where that shard set is, beside the plain data sets
BATCH = 256
WORKERS = 2
WARM_EPOCHS = 3  # after the cold one, in the same loader


# ----------------------------------------------------------------------------- measured code


def open_dataset(spec: dict[str, Any], local: str) -> Any:
    return bs.open_dataset(dict(spec, dir=local, batch_size=BATCH))


def open_loader(spec: dict[str, Any], ds: Any) -> Any:
    return bs.open_loader(dict(spec, workload="mixed", batch_size=BATCH, workers=WORKERS), ds)


def write_dataset(spec: dict[str, Any]) -> None:
    samples = bf.make_samples("mixed", spec["n"], spec["seed"])
    write = bf.writer_for(spec["impl"])
    compression = None if spec["compression"] == "none" else spec["compression"]
    write(spec["dir"], bf.WORKLOAD_COLUMNS["mixed"], samples, spec["size_limit"], compression=compression)


def plain_download(spec: dict[str, Any], local: str) -> int:
    """Every object of ``spec['urls']`` by raw HTTP GETs in threads, into files: bytes fetched."""
    import http.client
    from urllib.parse import urlsplit

    def get(pair: tuple[int, str]) -> int:
        number, url = pair
        parts = urlsplit(url)
        assert parts.hostname is not None, url
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
        try:
            conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"GET {url}: {response.status}")
            size = 0
            with open(os.path.join(local, f"object-{number}"), "wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    size += len(chunk)
            return size
        finally:
            conn.close()

    with ThreadPoolExecutor(spec["threads"]) as pool:
        return sum(pool.map(get, enumerate(spec["urls"])))


def warm_epochs(loader: Any, consume: harness.Consumer, n: int) -> dict[str, Any]:
    """``WARM_EPOCHS`` more epochs of the same loader, every shard cached: their mean and each one's seconds.

    One warm epoch is not enough: LitData's rate depends on the epoch (its chunk-to-worker assignment
    is drawn per epoch), alternating here between about 13k and 28k samples/s on local disk.
    """
    seconds, complete, first = [], True, None
    for _ in range(WARM_EPOCHS):
        started = time.perf_counter()
        keys: list[int] = []
        for batch in loader:
            if first is None:
                first = time.perf_counter() - started
            consume(batch)
            keys += bs.batch_keys("mixed", batch)
        seconds.append(time.perf_counter() - started)
        complete = complete and sorted(keys) == list(range(n))
    return {
        "next_first_seconds": first,
        "warm_seconds": statistics.fmean(seconds),
        "warm_epoch_seconds": seconds,
        "warm_complete": complete,
    }


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh process forked from the impl's template."""
    signal.alarm(spec.get("timeout", 0))
    os.environ.update(spec.get("env", {}))
    op, n = spec["op"], spec.get("n", 0)
    if op == "write":
        write_dataset(spec)
        return {}
    local = spec.get("local") or tempfile.mkdtemp(prefix="cache-", dir=spec["cache_root"])
    state = (
        pickle.loads(Path(spec["state_file"]).read_bytes())
        if op.startswith("resume") and op != "resume-setup"
        else None
    )
    consume = harness.Consumer()
    keys: list[int] = []
    result: dict[str, Any] = {"started": time.time()}
    os.sync()
    with harness.Span() as span:
        if op == "plain":
            result["bytes"] = plain_download(spec, local)
        elif op == "first":
            ds = open_dataset(spec, local)
            sample = next(iter(ds))
            consume(sample)
            keys = [bs.sample_key("mixed", sample)]
        elif op in ("first-loader", "resume"):
            ds = open_dataset(spec, local)
            loader = open_loader(spec, ds)
            if state is not None:
                loader.load_state_dict(state)
            it = iter(loader)
            batch = next(it)
            consume(batch)
            keys = bs.batch_keys("mixed", batch)
        elif op == "epoch":
            ds = open_dataset(spec, local)
            for sample in ds:
                consume(sample)
                keys.append(bs.sample_key("mixed", sample))
        elif op == "loader":
            ds = open_dataset(spec, local)
            loader = open_loader(spec, ds)
            for batch in loader:
                consume(batch)
                keys += bs.batch_keys("mixed", batch)
            result["cold_seconds"], result["cold_end"] = time.perf_counter() - span._t0, time.time()
            result.update(warm_epochs(loader, consume, n))
        elif op == "resume-setup":  # half an epoch, the state, the next batch, then the rest (fills the cache)
            ds = open_dataset(spec, local)
            loader = open_loader(spec, ds)
            it = iter(loader)
            for _ in range(n // 2 // BATCH):
                next(it)
            Path(spec["state_file"]).write_bytes(pickle.dumps(loader.state_dict()))
            result["expected"] = bs.batch_keys("mixed", next(it))
            for _ in it:
                pass
    if op in ("first-loader", "resume", "loader"):
        it = None  # the workers are joined here, so their CPU is counted
        harness.shut_down_workers(loader)
        span.stop_cpu()
    result.update(span.result(), consumed=consume.consumed, local=local)
    if op in ("epoch", "loader"):
        result["complete"] = sorted(keys) == list(range(n))
        result["all_bytes"] = consume.consumed >= bf.consumed_bytes("mixed", n, spec["seed"])
    elif op in ("first", "first-loader", "resume"):
        result["keys"] = keys
    if spec["impl"] == "ref" and op != "plain":
        result["shm_prefix"] = int(getattr(ds, "_shm_prefix_int", -1))
    return result


# ----------------------------------------------------------------------------- stores


class Store:
    """A server of the tests on 127.0.0.1 with a NetProxy in front; ``url(prefix)`` names a data set on it."""

    name = ""
    # Set by each store's __init__ before it calls this one: the tests' server, its process and port.
    server: Any
    process: subprocess.Popen[Any]
    port: int

    def __init__(self, work: Path) -> None:
        self.work = work
        self.proxy = netproxy.NetProxy(f"127.0.0.1:{self.port}")

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far of the server's process tree and of the proxy."""
        return harness.tree_cpu_seconds(self.process.pid), harness.tree_cpu_seconds(self.proxy.process.pid)

    @classmethod
    def start(cls, work: Path) -> Store:
        """The store, its server and proxy started; whatever had started is stopped if set-up fails."""
        store = cls.__new__(cls)
        try:
            store.__init__(work)  # type: ignore[misc]
        except BaseException:
            if hasattr(store, "proxy"):
                store.proxy.close()
            if hasattr(store, "server"):
                store.server.stop()
            raise
        return store

    def stop(self) -> None:
        self.proxy.close()
        self.server.stop()

    def env(self) -> dict[str, str]:
        """The environment a measurement's process needs to reach the store through the proxy."""
        raise NotImplementedError

    def url(self, prefix: str) -> str:
        """The URL of the data set at ``prefix`` on the store."""
        raise NotImplementedError

    def upload(self, directory: Path, prefix: str) -> None:
        """Every file under ``directory`` to ``prefix``, by the server's address (not the proxy's)."""
        raise NotImplementedError

    def object_urls(self, prefix: str, names: list[str]) -> list[str]:
        """URLs a plain HTTP GET fetches ``prefix/name`` by, through the proxy."""
        raise NotImplementedError


class S3(Store):
    name = "s3"

    def __init__(self, work: Path) -> None:
        from testsupport.s3 import MotoServer, s3_env

        self.server = MotoServer(work, count_requests=False)  # no proxy in this process shares the timings
        self.process, self.port = self.server.process, self.server.port
        os.environ.update(s3_env(self.server.endpoint))
        self.bucket = self.server.new_bucket()
        super().__init__(work)
        import boto3

        self.client = boto3.client("s3", endpoint_url=self.server.endpoint, region_name="us-east-1")

    def env(self) -> dict[str, str]:
        from testsupport.s3 import s3_env

        return dict(
            s3_env(self.proxy.endpoint), AWS_ENDPOINT_URL=self.proxy.endpoint, AWS_ENDPOINT_URL_S3=self.proxy.endpoint
        )

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def upload(self, directory: Path, prefix: str) -> None:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                self.client.upload_file(str(path), self.bucket, f"{prefix}/{path.relative_to(directory)}")

    def object_urls(self, prefix: str, names: list[str]) -> list[str]:
        """Presigned GET URLs through the proxy (the plain downloader signs nothing itself)."""
        import boto3

        signer = boto3.client("s3", endpoint_url=self.proxy.endpoint, region_name="us-east-1")
        return [
            signer.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": f"{prefix}/{name}"})
            for name in names
        ]


class GCS(Store):
    name = "gcs"

    def __init__(self, work: Path) -> None:
        from testsupport.emulators import FakeGCS

        self.server = FakeGCS(work)
        self.process, self.port = self.server.process, self.server.port
        self.root = self.server.new_root()
        super().__init__(work)

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.proxy.endpoint}

    def url(self, prefix: str) -> str:
        return f"{self.root}/{prefix}"

    def upload(self, directory: Path, prefix: str) -> None:
        from mds_core.storage.remote import open_store

        os.environ["STORAGE_EMULATOR_HOST"] = self.server.endpoint
        store = open_store(self.url(prefix))
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                store.upload(str(path), str(path.relative_to(directory)))

    def object_urls(self, prefix: str, names: list[str]) -> list[str]:
        from urllib.parse import quote

        bucket = self.root.split("://", 1)[1]
        return [
            f"{self.proxy.endpoint}/download/storage/v1/b/{bucket}/o/{quote(f'{prefix}/{name}', safe='')}?alt=media"
            for name in names
        ]


STORES = {"s3": S3, "gcs": GCS}
PEER_STORES = {"s3"}  # where the reference's and litdata's clients are installed in benchmarks/.venv


# ----------------------------------------------------------------------------- parent side


class Bench(harness.Bench):
    """The harness's Bench; ours runs in the project's environment, the peers in benchmarks/.venv."""

    expected: dict[tuple, Any]  # (*tag, impl): the batch a resume must return first (set by main)

    def server(self, family: str) -> Any:
        if family not in self.servers:
            python = self.args.python_ours if family == "ours" else self.args.python_peers
            saved = sys.executable
            sys.executable = python  # harness.Bench.server starts ``sys.executable``
            try:
                return super().server(family)
            finally:
                sys.executable = saved
        return self.servers[family]

    def run(self, key: tuple, spec: dict[str, Any], store: Store | None = None) -> dict[str, Any] | None:
        spec = dict(
            spec,
            timeout=self.args.timeout,
            seed=self.args.seed,
            job_root=str(self.work / "jobs"),
            cache_root=str(self.work / "cache"),
        )
        if store is not None:
            spec["env"] = store.env()
            # The last measurement's abandoned transfers (a loader stopped after its first batch) must
            # not share a capped link with this one.
            if not store.proxy.wait_idle():
                print(f"  note: connections still open at the proxy before {key}", file=sys.stderr)
            store.proxy.reset()
            server0, proxy0 = store.cpu()
        family = "ours" if spec["impl"] == "plain" else spec["impl"]
        res = self.measure(key, family, spec)
        if store is not None and res is not None:
            server1, proxy1 = store.cpu()
            stats = store.proxy.stats()
            res.update(server_cpu=server1 - server0, proxy_cpu=proxy1 - proxy0, bytes_down=stats["bytes_down"])
            res["exchanges"] = stats["exchanges"]
        if res is not None and res.get("local") and not spec.get("keep_cache"):
            shutil.rmtree(res["local"], ignore_errors=True)
        return res


def network_label(latency_ms: float, rate: float | None) -> str:
    return f"{latency_ms:g} ms" + (f", {rate:g} MB/s node cap" if rate else "")


def parse_networks(text: str) -> list[tuple[float, float | None]]:
    out = []
    for item in text.split(","):
        if item.strip():
            latency, _, rate = item.strip().partition("@")
            out.append((float(latency), float(rate) if rate else None))
    return out


def write_data(bench: Bench) -> dict[str, Path]:
    args = bench.args
    dirs = {}
    for impl in ("ours", "litdata"):
        out = bench.work / f"data-{impl}"
        print(f"[write] {impl} n={args.samples}", file=sys.stderr)
        bench.run(
            ("write", impl),
            dict(
                op="write",
                impl=impl,
                n=args.samples,
                dir=str(out),
                size_limit=args.size_limit,
                compression=args.compression,
            ),
        )
        dirs[impl] = out
    return dirs


OPS = ["first", "first-loader", "epoch", "loader", "resume-cold", "resume-warm"]


def run_network(bench: Bench, store: Store, network: tuple[float, float | None], dirs: dict[str, Path]) -> None:
    args = bench.args
    latency_ms, rate = network
    store.proxy.set(latency=latency_ms / 1000, node_rate=rate * 1e6 if rate else None, conn_rate=None)
    impls = [i for i in args.impls if i == "ours" or store.name in PEER_STORES]
    base = dict(n=args.samples)
    tag = (store.name, network)
    print(f"[{store.name} {network_label(*network)}] {', '.join(impls)}", file=sys.stderr)
    # resume: each library's own state at 50%, and a cache filled by a whole epoch (not timed). Every
    # resume of a library reads the cache directory its setup used (litdata's state names that path).
    warm_cache: dict[str, Path] = {}
    setups = [*impls, PINNED] if store.name in PEER_STORES and "ours" in impls else impls
    for impl in setups:
        local = fresh_cache(bench, impl)
        spec = dict(base, **resume_target(store, impl), op="resume-setup", state_file=state_path(bench, store, impl))
        res = bench.run((*tag, "resume-setup", impl), dict(spec, local=str(local), keep_cache=True), store)
        if res is not None:
            bench.expected[(*tag, impl)] = res["expected"]
            warm_cache[impl] = bench.work / f"warm-{impl}"
            shutil.rmtree(warm_cache[impl], ignore_errors=True)
            local.rename(warm_cache[impl])
    shards = sorted(p.name for p in dirs["ours"].iterdir() if p.name != "index.json")
    urls = store.object_urls("ours", shards)
    for _rep in range(args.reps):
        bench.run(
            (*tag, "plain", "plain"), dict(op="plain", impl="plain", urls=urls, threads=args.plain_threads), store
        )
        for impl in impls:
            url = store.url(impl_prefix(impl))
            for op in OPS:
                spec = dict(base, op=op, impl=impl, url=url)
                if op.startswith("resume"):
                    if (*tag, impl) not in bench.expected:
                        continue
                    local = fresh_cache(bench, impl, warm_cache[impl] if op == "resume-warm" else None)
                    spec.update(op="resume", state_file=state_path(bench, store, impl), local=str(local))
                bench.run((*tag, op, impl), spec, store)
            if impl == "ours" and (*tag, PINNED) in bench.expected:
                local = fresh_cache(bench, PINNED, warm_cache[PINNED])
                spec = dict(
                    base, **resume_target(store, PINNED), op="resume", state_file=state_path(bench, store, PINNED)
                )
                bench.run((*tag, "resume-pinned", "ours"), dict(spec, local=str(local)), store)
    for path in warm_cache.values():
        shutil.rmtree(path, ignore_errors=True)


def resume_target(store: Store, impl: str) -> dict[str, Any]:
    """What a resume of ``impl`` reads: the library's data set, or (PINNED) mds_core's shard set's version 1."""
    if impl == PINNED:
        return dict(impl="ours", url=store.url(SHARD_SET), version=1)
    return dict(impl=impl, url=store.url(impl_prefix(impl)))


def upload_shard_set(store: Store, directory: Path) -> None:
    """Version 1 of a versioned shard set at ``SHARD_SET``, holding ``directory``'s shards (mds_core only)."""
    from mds_core.storage.remote import open_store
    from mds_core.versions import ShardSet

    with ShardSet(store.url(SHARD_SET)).transaction("overwrite") as tx:
        out = open_store(tx.out)
        for path in sorted(directory.iterdir()):
            out.upload(str(path), path.name)


def fresh_cache(bench: Bench, impl: str, warm: Path | None = None) -> Path:
    """``impl``'s resume cache directory, empty, or a copy of ``warm`` (a cache a whole epoch filled)."""
    local = resume_dir(bench, impl)
    shutil.rmtree(local, ignore_errors=True)
    if warm is None:
        local.mkdir()
    else:
        shutil.copytree(warm, local)
    return local


def state_path(bench: Bench, store: Store, impl: str) -> str:
    """Where ``impl``'s loader state at 50% on ``store`` is kept between its setup and its resumes."""
    return str(bench.work / f"state-{store.name}-{impl}.pkl")


def resume_dir(bench: Bench, impl: str) -> Path:
    return bench.work / "cache" / f"resume-{impl}"


def impl_prefix(impl: str) -> str:
    return "litdata" if impl == "litdata" else "ours"


# ----------------------------------------------------------------------------- report

fmt = harness.fmt


def exchange_figures(res: dict[str, Any], shards: int, until: float | None = None) -> dict[str, Any]:
    rows = [row for row in res.get("exchanges", []) if until is None or row[2] <= until]
    summary = netproxy.summarize(rows)
    counts = summary["counts"]
    started = res["started"]
    index_gets = sum(1 for row in rows if netproxy.kind_of(row[0], row[1]) == "get" and "index.json" in row[1])
    heads, lists = counts.get("head", 0) + counts.get("meta", 0), counts.get("list", 0)
    return {
        "gets": counts.get("get", 0),
        "heads": heads,
        "lists": lists,
        "per_shard": (counts.get("get", 0) - index_gets + heads + lists) / shards,
        "in_flight": summary["in_flight"],
        "index_at": summary["index_get"] - started if summary["index_get"] else None,
        "first_shard_at": summary["first_shard_get"] - started if summary["first_shard_get"] else None,
    }


def report(bench: Bench, info: dict[str, Any], wall: float) -> str:
    args = bench.args
    lines = harness.header(
        "Remote streaming benchmark: mds_core vs mosaicml-streaming vs litdata",
        wall,
        f"{args.samples:,} `mixed` samples, {args.compression}, size_limit={args.size_limit:,} B (litdata chunk_bytes too), "
        f"{info['shards']} MDS shards ({info['mds_bytes'] / 1e6:.1f} MB), litdata {info['lit_bytes'] / 1e6:.1f} MB; "
        f"batch {BATCH}, {WORKERS} DataLoader workers; reps={args.reps} (median shown); "
        f"plain downloader {args.plain_threads} threads",
    )
    lines += [
        f"- peers' environment (`{os.path.relpath(args.python_peers)}`): {peer_versions(args.python_peers)}",
        "",
        "How to read it:",
        "- Each figure is the median over reps, each rep in a fresh process forked from a template that imported "
        "torch and the library's dataset and loader, nothing else (those imports are not timed; a store client the "
        "library imports lazily, and building it, are); every loader batches with one collate function for every library "
        "(`bench_streaming.common_collate`); every measurement starts with an empty cache "
        "directory except `resume, warm cache`. Reps interleaved.",
        "- Network: `benchmarks/netproxy.py` between clients and server adds the latency to each response's first "
        "byte (and a round trip to each new connection); a node cap shares one rate among all connections.",
        "- Ratios: mds_core ÷ the best peer, of medians (times: lower is better; rates: higher is better), with "
        "the per-rep range in brackets; the target is the issue's.",
        "- Requests are counted at the proxy: object GETs, HEADs (and GCS metadata GETs), listings; per shard = "
        "all of them but the GETs of `index.json`, over the shard (litdata: chunk) count. In flight: "
        "mean shard GETs outstanding while at least one is. CPU s: client = the measuring process and its reaped "
        "DataLoader workers; server = the store's process tree; proxy = the proxy process.",
        "",
    ]
    for store_name, network in info["networks"]:
        lines += network_section(bench, info, store_name, network)
    return "\n".join(lines)


def peer_versions(python: str) -> str:
    import subprocess

    code = (
        "import importlib.metadata as m\n"
        "for d in ('mosaicml-streaming', 'litdata', 'boto3', 'obstore', 'torch', 'numpy'):\n"
        "    try: print(d, m.version(d), end=', ')\n"
        "    except m.PackageNotFoundError: print(d, 'not installed', end=', ')\n"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip().rstrip(",") or done.stderr.strip()[-200:]


# The timing rows of a network's table: (label, op, result field, as samples/s (else seconds), target).
TIMING_ROWS = [
    ("construction → first sample, no workers (s)", "first", "seconds", False, 0.5),
    ("construction → first batch, DataLoader (s)", "first-loader", "seconds", False, 0.5),
    ("cold epoch, no workers (samples/s)", "epoch", "seconds", True, 1.5),
    ("cold epoch, DataLoader (samples/s)", "loader", "cold_seconds", True, 1.5),
    (f"warm epoch, DataLoader (samples/s, mean of {WARM_EPOCHS})", "loader", "warm_seconds", True, 2.0),
    ("next epoch's first batch, DataLoader (s)", "loader", "next_first_seconds", False, 0.5),
    ("resume at 50%, empty cache: first batch (s)", "resume-cold", "seconds", False, 0.5),
    ("resume at 50%, every shard cached: first batch (s)", "resume-warm", "seconds", False, 0.5),
]


def network_section(bench: Bench, info: dict[str, Any], store_name: str, network: tuple) -> list[str]:
    args, n, shards = bench.args, bench.args.samples, info["shards"]
    tag = (store_name, network)
    impls = [i for i in IMPLS if i in args.impls and (i == "ours" or store_name in PEER_STORES)]
    peers = [i for i in impls if i != "ours"]

    def values(op: str, impl: str, field: str = "seconds") -> list[float]:
        return [v for v in bench.all((*tag, op, impl), field) if v is not None]

    def rate(op: str, impl: str, field: str = "seconds") -> list[float]:
        return [n / v for v in values(op, impl, field) if v]

    lines = [
        f"## {store_name}, {network_label(*network)}",
        "",
        "| measure | " + " | ".join(LABELS[i] for i in impls) + " | mds_core ÷ best peer | target |",
        "|---|" + "--:|" * len(impls) + "---|---|",
    ]

    def row(label: str, series: dict[str, list[float]], digits: int, lower: bool, target: float | None) -> None:
        cells = [fmt(harness.median(series[i]), digits) if series[i] else "—" for i in impls]
        medians = {i: m for i in peers if (m := harness.median(series[i])) is not None}
        best = (min if lower else max)(medians, key=medians.__getitem__) if medians else None
        ratio = ""
        if best and series.get("ours"):
            got = harness.ratio_of_medians(series["ours"], series[best])
            ratio = f"{LABELS[best]}: " + harness.ratio_cell(got, target, at_most=lower)
        lines.append(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {ratio} | {('≤ ' if lower else '≥ ') + f'{target:g}×' if target else ''} |"
        )

    for label, op, field, per_second, target in TIMING_ROWS:
        series = {i: (rate if per_second else values)(op, i, field) for i in impls}
        row(label, series, 0 if per_second else 3, not per_second, target)
    if values("resume-pinned", "ours"):
        pinned = {i: values("resume-pinned" if i == "ours" else "resume-warm", i) for i in impls}
        row("the same, mds_core on a pinned shard-set version (s)", pinned, 3, True, 0.5)

    def median_field(op: str, impl: str, name: str, digits: int = 2, until: str | None = None) -> str:
        figures = [
            exchange_figures(r, shards, r.get(until) if until else None)[name]
            for r in bench.results.get((*tag, op, impl), [])
        ]
        return fmt(harness.median(v for v in figures if v is not None), digits)

    def plain_row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(i) for i in impls) + " | | |")

    shard_count = {i: info["shards"] if i != "litdata" else info["lit_chunks"] for i in impls}

    def per_shard(op: str, until: str | None = None) -> Any:
        def cell(impl: str) -> str:
            figures = [
                exchange_figures(r, shard_count[impl], r.get(until) if until else None)
                for r in bench.results.get((*tag, op, impl), [])
            ]
            if not figures:
                return "—"
            f = figures[0]
            return (
                f"{statistics.median(x['per_shard'] for x in figures):.2f} "
                f"({f['gets']} GET, {f['heads']} HEAD, {f['lists']} LIST; {shard_count[impl]} shards)"
            )

        return cell

    plain_row("requests per shard, cold epoch, no workers", per_shard("epoch"))
    plain_row("requests per shard, cold epoch, DataLoader", per_shard("loader", "cold_end"))
    plain_row("shard GETs in flight, mean (cold epoch, no workers)", lambda i: median_field("epoch", i, "in_flight"))
    plain_row(
        "shard GETs in flight, mean (cold epoch, DataLoader)",
        lambda i: median_field("loader", i, "in_flight", until="cold_end"),
    )
    plain_row("index GET starts after construction began (s)", lambda i: median_field("first", i, "index_at", 3))
    plain_row(
        "first shard GET starts after construction began (s)", lambda i: median_field("first", i, "first_shard_at", 3)
    )
    plain_row(
        "MB downloaded, cold epoch, no workers",
        lambda i: fmt(harness.median(x / 1e6 for x in values("epoch", i, "bytes_down")), 1),
    )
    for op, what in (("epoch", "cold epoch, no workers"), ("loader", "cold + warm epoch, DataLoader")):
        plain_row(
            f"CPU s client / server / proxy: {what}",
            lambda i, op=op: " / ".join(
                fmt(harness.median(values(op, i, field)), 2) for field in ("cpu_seconds", "server_cpu", "proxy_cpu")
            ),
        )
    lines.append("")
    # the physical limit
    plain = values("plain", "plain")
    if plain:
        mb = harness.median_of(values("plain", "plain", "bytes")) / 1e6
        ours_epoch = rate("epoch", "ours") if "ours" in impls else []
        limit_rate = [n / s for s in plain]
        plain_seconds = harness.median_of(plain)
        share = harness.ratio_of_medians(ours_epoch, limit_rate)
        lines += [
            f"Physical limit: the {info['shards']} MDS shards ({mb:.1f} MB) fetched by {args.plain_threads} threads of "
            f"raw HTTP GETs over the same proxy: **{plain_seconds:.3f} s** ({mb / plain_seconds:.0f} MB/s, "
            f"{n / plain_seconds:,.0f} samples/s), CPU s client / server / proxy "
            + " / ".join(
                fmt(harness.median(values("plain", "plain", f)), 2) for f in ("cpu_seconds", "server_cpu", "proxy_cpu")
            )
            + ". mds_core's cold epoch (no workers) at "
            + (harness.ratio_cell(share, 0.8 if network[1] else None) if share else "—")
            + " of that rate"
            + (" (target ≥ 0.8× where the cap makes the network the limit)." if network[1] else "."),
            "",
        ]
    notes = check_notes(bench, tag, impls)
    if notes:
        lines += ["Checks: " + "; ".join(notes), ""]
    errors = [f"{k[-2]} {k[-1]}: {v}" for k, v in bench.errors.items() if k[: len(tag)] == tag]
    if errors:
        lines += ["Errors: " + "; ".join(errors), ""]
    return lines


def check_notes(bench: Bench, tag: tuple, impls: list[str]) -> list[str]:
    notes = []
    for impl in impls:
        bad = []
        if False in bench.all((*tag, "epoch", impl), "complete") or False in bench.all(
            (*tag, "loader", impl), "complete"
        ):
            bad.append("**not every sample once**")
        if False in bench.all((*tag, "loader", impl), "warm_complete"):
            bad.append("**warm epoch not every sample once**")
        if False in bench.all((*tag, "epoch", impl), "all_bytes"):
            bad.append("**the consumer did not copy every payload byte**")
        want = bench.expected.get((*tag, impl))
        for op in ("resume-cold", "resume-warm"):
            got = bench.all((*tag, op, impl), "keys")
            if want is not None and got and any(g != want for g in got):
                bad.append(f"**{op}: batch differs from the uninterrupted run**")
        pinned = bench.all((*tag, "resume-pinned", impl), "keys")
        if pinned and any(g != bench.expected.get((*tag, PINNED)) for g in pinned):
            bad.append("**resume on a pinned version: batch differs from the uninterrupted run**")
        notes.append(f"{LABELS[impl]}: " + ("; ".join(bad) if bad else "every sample once, resumed batches correct"))
    ours_first = {tuple(k) for k in bench.all((*tag, "first", "ours"), "keys")}
    ref_first = {tuple(k) for k in bench.all((*tag, "first", "ref"), "keys")}
    if ours_first and ref_first:
        notes.append(
            "mds_core's first sample "
            + ("= the reference's" if ours_first == ref_first else "**differs from the reference's**")
        )
    return notes


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = harness.option_parser(
        __doc__,
        [
            ("--samples", 20_000, "samples of the mixed workload (~9 KB each)"),
            ("--size-limit", 16 << 20, "shard size limit (litdata chunk_bytes)"),
            ("--compression", "zstd", "the shards' compression, both formats: zstd, or none (uncompressed)"),
            ("--stores", "s3,gcs", "comma list of: s3, gcs"),
            (
                "--networks",
                "0,25,100,25@100",
                "comma list of LATENCY_MS[@NODE_MB_PER_S] for s3 (default 0,25,100,25@100)",
            ),
            ("--gcs-networks", "25", "the same for gcs (only mds_core and the plain line)"),
            ("--impls", "ours,ref,litdata", None),
            ("--reps", 3, None),
            ("--plain-threads", 8, None),
            ("--seed", 0, None),
            ("--timeout", 900, "seconds after which one measurement is killed"),
            ("--python-ours", str(ROOT / ".venv" / "bin" / "python"), None),
            ("--python-peers", str(HERE / ".venv" / "bin" / "python"), None),
            ("--quick", False, "smoke run: 4,000 samples, 4 MiB shards, 0 and 25 ms, 1 rep"),
            ("--out", str(HERE / "results-remote-latest.md"), None),
            ("--raw", None, "also write every measurement (with the proxy's request log) here, as JSON"),
        ],
    )
    args = parser.parse_args(argv)

    if args._serve:
        harness.serve(lambda: bs.import_family(args._serve), measure)
        return 0
    if args.quick:
        args.samples, args.size_limit, args.reps = min(args.samples, 4000), min(args.size_limit, 4 << 20), 1
        if args.networks == parser.get_default("networks"):
            args.networks = "0,25"
    args.impls = [i for i in args.impls.split(",") if i]
    sys.path.insert(0, str(ROOT))  # testsupport: the servers the tests start

    t0 = time.perf_counter()
    harness.clean_reference_shm() if "ref" in args.impls and _has_streaming() else None
    with tempfile.TemporaryDirectory(prefix="mds-bench-remote-") as tmp:
        work = Path(tmp)
        (work / "cache").mkdir()
        bench = Bench(args, work, Path(__file__).resolve())
        bench.expected = {}
        info: dict[str, Any] = {"networks": []}
        stores: list[Store] = []
        try:
            dirs = write_data(bench)
            info["shards"] = sum(1 for p in dirs["ours"].iterdir() if p.name != "index.json")
            info["mds_bytes"] = sum(p.stat().st_size for p in dirs["ours"].iterdir())
            info["lit_chunks"] = sum(1 for p in dirs["litdata"].rglob("*.bin"))
            info["lit_bytes"] = sum(p.stat().st_size for p in dirs["litdata"].rglob("*") if p.is_file())
            for name in args.stores.split(","):
                store = STORES[name].start(work)
                stores.append(store)
                store.upload(dirs["ours"], "ours")
                if name in PEER_STORES:
                    store.upload(dirs["litdata"], "litdata")
                    upload_shard_set(store, dirs["ours"])
                for network in parse_networks(args.networks if name == "s3" else args.gcs_networks):
                    run_network(bench, store, network, dirs)
                    info["networks"].append((name, network))
        finally:
            bench.close()
            for store in stores:
                store.stop()
    text = report(bench, info, time.perf_counter() - t0)
    harness.write_report(text, args.out)
    if args.raw:
        import json

        Path(args.raw).write_text(json.dumps([{"key": list(k), "runs": v} for k, v in bench.results.items()]))
    return 1 if bench.errors else 0


def _has_streaming() -> bool:
    try:
        import streaming  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
