"""Fuzz target for the datasets users open: a damaged ``index.json`` over real shard files.

Each input replaces one seed dataset's ``index.json`` and then, as a training script would, takes
``len()``, reads ``ds[i]`` for a few ``i`` and iterates, through ``LocalDataset`` and through
``StreamingDataset`` (``local=``, and for some inputs ``remote=`` that same directory with a fresh
cache). Everything the input and the readers changed (the index, raw files decompressed beside
their zips, files under a damaged basename, the cache) is put back afterwards, so inputs stay
independent of each other.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from mds_core import LocalDataset, MDSWriter, StreamingDataset
from tests.fuzz import seeds
from tests.fuzz.checks import attempt
from tests.fuzz.mutate import mutate_bytes, mutate_json

# The counts and sizes a damaged index holds: the format's edges (2**30 - 3 samples, 2**32 - 1 bytes),
# int64's, and beyond.
COUNTS = [0, 1, 2, 4, 8, 2**16, 2**30 - 3, 2**30 - 2, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64, 10**30, -1]
# An epoch's sample order takes memory in proportion to the samples the index claims, as in the
# reference: an index claiming a billion samples is ordered before any shard is opened. Iterating
# such claims tests the machine, not the code; len() and ds[i] still run for them.
ORDER_BUDGET = 1 << 16
GOLDEN = ["merged", "zero_sample_shard"]  # shards in sub-directories; shards of 0 samples


def _write(out: str, compression: str | None = None) -> str:
    columns = {"id": "int", "text": "str", "vec": "ndarray:int16"}
    with MDSWriter(out=out, columns=columns, size_limit=300, exist_ok=True, compression=compression) as writer:
        for i in range(16):
            writer.write({"id": i, "text": f"row {i}", "vec": np.arange(i % 5 + 1, dtype=np.int16)})
    return out


class Snapshot:
    """A dataset directory's files, restored after each input: changed ones rewritten, new ones removed."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dirs, names = _walk(root)
        self.files = {name: Path(root, name).read_bytes() for name in names}
        self.stats = {name: _stat(os.path.join(root, name)) for name in names}

    def restore(self) -> None:
        dirs, names = _walk(self.root)
        for name in names - self.files.keys():
            os.unlink(os.path.join(self.root, name))
        for name in sorted(dirs - self.dirs, reverse=True):  # deepest first
            shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)
        for name, data in self.files.items():
            path = os.path.join(self.root, name)
            if _stat(path) != self.stats[name]:
                Path(path).write_bytes(data)
                self.stats[name] = _stat(path)


def _walk(root: str) -> tuple[set[str], set[str]]:
    """(directories, files) under ``root``, as paths relative to it."""
    dirs: set[str] = set()
    files: set[str] = set()
    for parent, subdirs, names in os.walk(root):
        relative = os.path.relpath(parent, root)
        dirs.update(os.path.normpath(os.path.join(relative, d)) for d in subdirs)
        files.update(os.path.normpath(os.path.join(relative, n)) for n in names)
    return dirs, files


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class DatasetTarget:
    """A damaged ``index.json`` -> ``len()``, ``ds[i]`` and iteration of ``LocalDataset`` and ``StreamingDataset``."""

    name = "dataset"
    share = 0.2  # of a whole campaign's inputs per target: each input opens and reads whole datasets 2-3 times

    def setup(self, workdir: str) -> None:
        self.workdir = workdir
        roots = {"raw": _write(os.path.join(workdir, "raw")), "zstd": _write(os.path.join(workdir, "zstd"), "zstd")}
        # Half the zstd shards decompressed beside their zips, as a first read leaves them.
        with LocalDataset(roots["zstd"]) as zstd:
            for shard_id in range(0, len(zstd.shards), 2):
                zstd.shard_reader(shard_id)
        for name in GOLDEN:
            roots[name] = os.path.join(workdir, name)
            if not os.path.exists(roots[name]):
                shutil.copytree(seeds.GOLDEN / name, roots[name])
        self.roots = roots
        self.snapshots = {name: Snapshot(root) for name, root in roots.items()}
        self.texts = {name: snap.files["index.json"] for name, snap in self.snapshots.items()}
        self.caches = os.path.join(workdir, "caches")
        self.job_root = os.path.join(workdir, "jobs")

    def generate(self, rng: random.Random) -> dict[str, Any]:
        name = rng.choice(sorted(self.roots))
        text = self.texts[name]
        choice = rng.random()
        if choice < 0.4:
            text = json.dumps(_damage_counts(rng, json.loads(text))).encode()
        elif choice < 0.8:
            text = json.dumps(mutate_json(rng, json.loads(text))).encode()
        else:
            text = mutate_bytes(rng, text, list(self.texts.values()))
        return {
            "dataset": name,
            "text": text,
            "picks": [rng.randrange(-30, 30) for _ in range(3)],
            "shuffle": rng.random() < 0.3,
            "remote": rng.random() < 0.1,
        }

    def check(self, case: dict[str, Any]) -> None:
        root, snapshot = self.roots[case["dataset"]], self.snapshots[case["dataset"]]
        Path(root, "index.json").write_bytes(case["text"])
        try:
            attempt(lambda: self._local(root, case["picks"]))
            attempt(lambda: self._streaming(case, local=root))
            if case["remote"]:
                remote = {"remote": root, "local": os.path.join(self.caches, "remote"), "download_retry": 0}
                attempt(lambda: self._streaming(case, **remote))
        finally:
            snapshot.restore()
            shutil.rmtree(self.caches, ignore_errors=True)

    def _local(self, root: str, picks: list[int]) -> None:
        dataset = LocalDataset(root, cache_dir=os.path.join(self.caches, "local"))
        _use(dataset, len(dataset), picks, iterate=True)

    def _streaming(self, case: dict[str, Any], **where: Any) -> None:
        dataset = StreamingDataset(
            **where, batch_size=2, shuffle=case["shuffle"], job_root=self.job_root, telemetry=False
        )
        len(dataset)  # the reference's: this device's share of an epoch
        _use(dataset, dataset.num_samples, case["picks"], iterate=dataset.epoch_size <= ORDER_BUDGET)


def _use(dataset: Any, num_samples: int, picks: list[int], iterate: bool) -> None:
    """``ds[i]`` for the first, last and a few other samples (some out of range), then a whole pass."""
    for index in sorted({0, num_samples - 1, num_samples, -1, *picks}):
        attempt(dataset.__getitem__, index)
    if iterate:
        attempt(lambda: sum(1 for _ in dataset))


def _damage_counts(rng: random.Random, index: Any) -> Any:
    """A count or size field of one shard set to an edge value; sometimes with a file size that agrees."""
    shard = rng.choice(index["shards"])
    fields: list[tuple[Any, Any]] = [(shard, "samples"), (shard["raw_data"], "bytes"), (shard, "size_limit")]
    fields += [(shard["zip_data"], "bytes")] if shard["zip_data"] else []
    fields += [(shard["column_sizes"], k) for k in range(len(shard["column_sizes"]))]
    owner, key = rng.choice(fields)
    owner[key] = rng.choice(COUNTS) + rng.choice((0, 0, 0, -1, 1))
    if rng.random() < 0.3 and shard["samples"] >= 0:  # consistent, only false: the header fits the claimed file
        shard["raw_data"]["bytes"] = min(4 * (shard["samples"] + 2), 2**32 - 1)
    return index
