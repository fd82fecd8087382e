"""The soak: reader ranks stream a pinned version from S3 through a faulty link while a writer commits.

    python -m tests.soak.soak --minutes 10 --out soak-report/      (``make soak``)

A moto S3 server (``testsupport.s3.MotoServer``) holds a shard set; version 1 is the dataset. Every client
talks to it through ``testsupport.fault_proxy.FaultProxy``, which fails each GET with probability ``fault_rate``
(drop, 503, delay or truncate, drawn by ``seed``). ``ranks`` real rank processes (one node, torchrun
env vars) with ``workers`` persistent DataLoader workers each read version 1 epoch after epoch into
one shared cache bounded by ``cache_limit`` (a fraction of the dataset, so shards are evicted), until
``minutes`` have passed and at least ``min_epochs`` are done. Meanwhile a writer process commits and
publishes a new version every ``writer_interval`` seconds to the same root. A probe samples every
process's RSS, fds and threads and the cache directory. ``tests.soak.report`` judges the run and
``tests.soak.figures`` writes ``report.json``, ``report.txt``, CSV curves and ``curves.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from mds_core import MDSWriter
from mds_core.versions import ShardSet
from tests.soak.figures import write_report
from tests.soak.probe import Probe
from tests.soak.report import Flatness, analyse
from tests.soak.writer import COLUMNS
from testsupport.fault_proxy import FaultProxy, RandomFaults, apply_env, free_port, restore_env
from testsupport.s3 import MotoServer, s3_env

ROOT = Path(__file__).resolve().parents[2]
FAILING = ("drop", "status", "truncate")  # faults that fail an attempt; a delay only slows it


@dataclass
class SoakConfig:
    minutes: float = 0.0  # read epochs until this much time has passed (and at least min_epochs)
    min_epochs: int = 3
    max_epochs: int = 10_000
    ranks: int = 2
    workers: int = 4
    batch_size: int = 8
    samples: int = 24_576  # a multiple of ranks x workers x batch_size: no padded epochs
    sample_bytes: int = 1000
    shard_bytes: int = 256 << 10  # the writer's size_limit
    cache_fraction: float = 0.3  # cache_limit as a fraction of the dataset's shard bytes
    fault_rate: float = 0.05  # probability that a GET gets a fault
    faults: str = "drop,status,delay,truncate"
    delay_seconds: float = 0.5
    seed: int = 0
    download_retry: int = 6  # P(a file fails every attempt) = fault_rate ** download_retry
    download_timeout: float = 60.0
    writer_interval: float = 2.0
    writer_samples: int = 256
    probe_interval: float = 1.0
    shuffle_algo: str = "py1s"
    canonical_nodes: int = 4  # num_canonical_nodes (0: the default, 64 per node for py1s, needs a larger cache)


class _Dirs:
    """The run's folders: the ranks' epoch records, the node's cache, job directories, TMPDIR, logs."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.epochs, self.cache, self.jobs, self.tmp, self.logs = (
            out / name for name in ("epochs", "cache", "jobs", "tmp", "logs")
        )
        for folder in (self.epochs, self.cache, self.jobs, self.tmp, self.logs):
            folder.mkdir(parents=True, exist_ok=True)


def run_soak(
    config: SoakConfig, out: Path, server: MotoServer | None = None, tolerances: Flatness = Flatness()
) -> dict[str, Any]:
    """Run the whole scenario, write the report into ``out`` and return it (``report["passed"]``)."""
    dirs = _Dirs(out)
    own_server = server is None
    server = server or MotoServer(dirs.logs, count_requests=False)  # its FaultProxy counts
    saved = apply_env(s3_env(server.endpoint))  # the dataset goes straight to the server
    proxy = None
    try:
        bucket = server.new_bucket()
        root = f"s3://{bucket}/set"
        params = {**asdict(config), **_write_dataset(root, config)}
        params["cache_limit_bytes"] = int(params["dataset_bytes"] * config.cache_fraction)
        proxy = FaultProxy(server.endpoint)
        actions = {"drop": 0, "status": 503, "delay": config.delay_seconds, "truncate": 100}
        proxy.random = RandomFaults(
            config.fault_rate, {k: actions[k] for k in config.faults.split(",")}, seed=config.seed, path=f"^/{bucket}/"
        )
        env = {**os.environ, **s3_env(proxy.endpoint), "TMPDIR": str(dirs.tmp), "PYTHONPATH": str(ROOT)}
        started = time.monotonic()
        outcome = _run_processes(config, params, root, dirs, env, server)
        outcome["seconds"] = round(time.monotonic() - started, 1)
        probe = outcome.pop("probe")
        with proxy.lock:
            injected = dict(proxy.random.injected)
            faults = {
                "matched": proxy.random.matched,
                "injected": injected,
                "retried": sum(n for kind, n in injected.items() if kind in FAILING),
            }
        judged = {f"rank{r}" for r in range(config.ranks)} | {"writer"}
        report = analyse(
            dirs.epochs, params, probe.samples, probe.disk, faults, outcome, judged, tolerances, probe.wall_start
        )
        write_report(out, report, probe.samples, probe.disk)
        return report
    finally:
        if proxy is not None:
            proxy.stop()
        restore_env(saved)
        if own_server:
            server.stop()


def _write_dataset(root: str, config: SoakConfig) -> dict[str, int]:
    """Version 1 of the shard set: ``samples`` ids with incompressible payloads."""
    rng = np.random.default_rng(config.seed)
    shard_set = ShardSet(root)
    with shard_set.transaction("overwrite") as tx:
        with MDSWriter(out=tx.out, columns=COLUMNS, size_limit=config.shard_bytes) as writer:
            for i in range(config.samples):
                writer.write({"id": i, "payload": rng.bytes(config.sample_bytes)})
    shards = shard_set.shards(1)
    return {"shards": len(shards), "dataset_bytes": sum(s.raw_data.bytes for s in shards)}


def _start(module: str, config: dict[str, Any], name: str, dirs: _Dirs, env: dict[str, str]) -> subprocess.Popen:
    path = dirs.logs / f"{name}.json"
    path.write_text(json.dumps(config))
    log = open(dirs.logs / f"{name}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", module, str(path)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )


def _run_processes(
    config: SoakConfig, params: dict[str, Any], root: str, dirs: _Dirs, env: dict[str, str], server: MotoServer
) -> dict[str, Any]:
    stop = dirs.out / "writer.stop"
    stop.unlink(missing_ok=True)
    # Both read their settings from the config's fields (``SoakConfig``), and the run's places from the rest.
    writer = _start(
        "tests.soak.writer",
        {**asdict(config), "root": root, "stop": str(stop), "out": str(dirs.out)},
        "writer",
        dirs,
        env,
    )
    deadline = time.time() + config.minutes * 60
    reader = {
        **asdict(config),
        "root": root,
        "version": 1,
        "local": str(dirs.cache),
        "job_root": str(dirs.jobs),
        "out": str(dirs.epochs),
        "cache_limit": params["cache_limit_bytes"],
        "deadline": deadline,
        "barrier_timeout": 600,
    }
    port, ranks = free_port(), []
    for rank in range(config.ranks):
        world = {"RANK": str(rank), "WORLD_SIZE": str(config.ranks), "LOCAL_RANK": str(rank)}
        world |= {"LOCAL_WORLD_SIZE": str(config.ranks), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        ranks.append(_start("tests.soak.reader", reader, f"rank{rank}", dirs, {**env, **world}))
    roles = {proc.pid: f"rank{r}" for r, proc in enumerate(ranks)}
    roles.update({writer.pid: "writer", server.process.pid: "moto", os.getpid(): "proxy"})
    probe = Probe(
        roles, {proc.pid: r for r, proc in enumerate(ranks)}, dirs.cache, dirs.tmp, dirs.jobs, config.probe_interval
    )
    hard_stop = deadline + 900  # epochs that never finish are a finding too, not a hang
    errors: dict[str, str] = {}
    try:
        _wait(ranks, hard_stop, errors)
    finally:
        stop.touch()
        _finish(writer, 60)
        for proc in ranks:
            _finish(proc, 5)
        probe.stop()
    for rank in range(config.ranks):
        error = dirs.epochs / f"rank{rank}-error.txt"
        if error.exists():
            errors[f"rank{rank}"] = error.read_text()[-3000:]
    writer_status = dirs.out / "writer.json"
    status = json.loads(writer_status.read_text()) if writer_status.exists() else {}
    return {"reader_errors": errors, "writer": status, "probe": probe}


def _wait(ranks: list[subprocess.Popen], hard_stop: float, errors: dict[str, str]) -> None:
    """Until every rank exits; one failing rank stops the others (they would wait for it at the barrier)."""
    while any(proc.poll() is None for proc in ranks):
        failed = [r for r, proc in enumerate(ranks) if proc.returncode not in (None, 0)]
        if failed or time.time() > hard_stop:
            for rank in failed:
                errors[f"rank{rank}"] = f"exited with {ranks[rank].returncode}"
            if not failed:
                errors["timeout"] = "the readers did not finish within 15 minutes of the deadline"
            return
        time.sleep(0.5)
    for rank, proc in enumerate(ranks):
        if proc.returncode:
            errors[f"rank{rank}"] = f"exited with {proc.returncode}"


def _finish(proc: subprocess.Popen, timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("soak-report"))
    for field in fields(SoakConfig):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    report = run_soak(SoakConfig(**args), out)
    print((out / "report.txt").read_text(), end="")
    print(f"report: {out}/report.json, {out}/report.txt, {out}/curves.png, {out}/processes.csv, {out}/disk.csv")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
