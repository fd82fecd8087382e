"""Fuzz target for symlinked caches: a remote stream's cache folder with links, stray files and hostile
basenames planted in it, then read.

The remote is a local folder of twelve one-sample shards (zstd or raw), half of them under ``sub/``.
Each input empties the cache, fills in some of its files (zips and raw files), then plants a few
entries: symbolic links (absolute or relative) to the sentinel folder ``outside/``, to files there
(some of exactly a shard's size, so they pass the size check), to paths there that do not exist yet,
or back into the cache; stray files and folders where files belong; for some inputs an ``index.json``
whose basenames go through those links. Then one read: a ``StreamingDataset`` over the remote with
that cache (a whole pass and ``ds[i]``, with or without ``cache_limit``), ``ShardCache.ensure`` of a
few shards (a small ``cache_limit`` makes it evict), or ``raw_shard_path`` of every shard. Only
``MDSError`` may escape, and nothing outside the cache and the job root may change: ``outside/`` and
the remote are compared, entry by entry (names, types, sizes, mtimes, bytes), after every input, and
put back if they changed; a failure is named by the kind of entry that appeared or changed there.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

from mds_core import StreamingDataset
from mds_core.errors import MDSError
from mds_core.format.index import dumps_index, parse_index
from mds_core.storage.raw_shards import raw_shard_path
from mds_core.storage.remote import open_store
from mds_core.storage.shard_cache import ShardCache, _index_key
from tests.fuzz.checks import attempt, changed_entries, tree_state
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_json
from tests.fuzz.seeds import write_rows

REMOTES = ("zstd", "raw")
HOSTILE_BASENAMES = ["sub", "sub/", "./{}", "sub/./{}", "sub//{}", "link/{}", "{}/", ".", "..", "sub/.."]
HOSTILE_BASENAMES += [".mds-cache/{}", "index.json", "./index.json", ".mds-cache", "out/{}", "{}.tmp", "a/../{}"]
HOSTILE_BASENAMES += ["/{}", "sub/sub/{}"]


def _write_remote(out: str, compression: str | None) -> str:
    """Twelve shards of one sample, the last six moved under ``sub/`` (the index names them there)."""
    if os.path.exists(os.path.join(out, "index.json")):
        return out
    write_rows(out, range(12), repeat=3, compression=compression, size_limit=120)
    shards = parse_index(Path(out, "index.json").read_bytes())
    os.makedirs(os.path.join(out, "sub"))
    for at in range(len(shards) // 2, len(shards)):
        for info in shards[at].files:
            if os.path.exists(os.path.join(out, info.basename)):  # a zstd writer keeps only the zip
                os.rename(os.path.join(out, info.basename), os.path.join(out, "sub", info.basename))
        shards[at] = shards[at].with_prefix("sub")
    Path(out, "index.json").write_text(dumps_index(shards))
    return out


class CacheTarget:
    """Links, stray files and hostile basenames planted in a stream's cache -> a read; nothing outside changes."""

    name = "cache"

    def setup(self, workdir: str) -> None:
        self.workdir = workdir
        folders = {kind: os.path.join(workdir, f"remote-{kind}") for kind in REMOTES}
        self.remotes = {
            kind: _write_remote(folder, "zstd" if kind == "zstd" else None) for kind, folder in folders.items()
        }
        self.texts = {kind: Path(root, "index.json").read_bytes() for kind, root in self.remotes.items()}
        self.shards = {kind: parse_index(text) for kind, text in self.texts.items()}
        self.files = {kind: _cached_files(self.remotes[kind], shards) for kind, shards in self.shards.items()}
        outside = os.path.join(workdir, "outside")
        if not os.path.exists(outside):
            for folder in ("dir/sub", "sub", ".mds-cache/locks"):
                os.makedirs(os.path.join(outside, folder))
            files = {"file.bin": b"precious" * 8, "dir/keep": b"keep", "sub/keep": b"keep", "index.json": b"{}"}
            for kind, shards in self.shards.items():  # files of exactly a shard's sizes: the size check passes
                for at, shard in enumerate(shards):
                    files.update({f"{kind}-{at}-{f.bytes}": (bytes(range(256)) * 64)[: f.bytes] for f in shard.files})
            for name, data in files.items():
                Path(outside, name).write_bytes(data)
                os.utime(os.path.join(outside, name), (1, 1))  # old: a stale temporary's age test passes through a link
        planted = sorted(n for n in os.listdir(outside) if os.path.isfile(os.path.join(outside, n)))
        self.targets = [
            "outside",
            "outside/dir",
            "outside/sub",
            "outside/.mds-cache",
            *[f"outside/{n}" for n in planted],
        ]
        self.watched = {name: os.path.join(workdir, name) for name in ("outside", *(f"remote-{k}" for k in REMOTES))}
        for name, path in self.watched.items():  # a copy to put back what a failing input changed
            if not os.path.exists(os.path.join(workdir, "pristine", name)):
                shutil.copytree(path, os.path.join(workdir, "pristine", name), symlinks=True)
        self.states = {name: tree_state(path) for name, path in self.watched.items()}
        self.cache, self.jobs = os.path.join(workdir, "cache"), os.path.join(workdir, "jobs")
        self.top = sorted(set(os.listdir(workdir)) | {"cache", "jobs"})

    def generate(self, rng: random.Random) -> dict[str, Any]:
        kind = rng.choice(REMOTES)
        shards = self.shards[kind]
        names = [f.basename for s in shards for f in s.files]
        key = _index_key(shards)
        places = names + ["sub", ".mds-cache", ".mds-cache/locks", f".mds-cache/ledger-{key}.u64"]
        places += [f".mds-cache/ledger-{key}.lock", f".mds-cache/locks/{key}-0.lock", f".mds-cache/locks/{key}-4.lock"]
        places += ["index.json", f"{names[0]}.4000000.0badcafe.tmp", "sub/x.4000000.0badcafe.tmp", "link"]
        plants = []
        for _ in range(rng.choice((0, 1, 1, 2, 3, 5))):
            where, how = rng.choice(places), rng.random()
            if how < 0.7:  # to a folder or file outside, or to where nothing is yet (relative, or absolute)
                target = rng.choice(self.targets) if how < 0.55 else rng.choice(("outside/new", "outside/dir/new"))
                plants.append(["link", where, target, rng.random() < 0.5])
            elif how < 0.8:
                plants.append(["link", where, rng.choice(["cache", "cache/" + rng.choice(names), "cache/sub"]), True])
            elif how < 0.9:
                plants.append(["file", where, rng.choice((0, 7, 64, 120, 200, 4096))])
            else:
                plants.append(["dir", where])
        text = None
        if rng.random() < 0.3:  # basenames that route through what was planted
            index = json.loads(self.texts[kind])
            for _ in range(rng.choice((1, 2))):
                info = rng.choice([f for s in index["shards"] for f in (s["raw_data"], s["zip_data"]) if f])
                info["basename"] = rng.choice(HOSTILE_BASENAMES).format(info["basename"].rsplit("/", 1)[-1])
            if rng.random() < 0.3:
                index = mutate_json(rng, index)
            text = json.dumps(index).encode()
        return {
            "remote": kind,
            "prefill": [rng.random() < 0.5 for _ in names],
            "plants": plants,
            "index": text,
            "read": rng.choice(("streaming", "ensure", "ensure", "ensure", "raw_shard_path", "raw_shard_path")),
            "limited": rng.random() < 0.5,
            "keep_zip": rng.random() < 0.3,
            "picks": [rng.randrange(len(shards) + 1) - 1 for _ in range(rng.choice((1, 3, 6)))],
        }

    def check(self, case: dict[str, Any]) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)
        os.mkdir(self.cache, 0o700)
        remote = self.remotes[case["remote"]]
        try:
            self._plant(case, remote)
            self._read(case, remote)
        except MDSError:
            pass
        finally:  # also when something else escaped: a write outside is the worse failure
            if case["index"] is not None:
                _put_back(os.path.join(remote, "index.json"), self.texts[case["remote"]])
            self._check_outside(case)

    def _check_outside(self, case: dict[str, Any]) -> None:
        """Nothing outside the cache and the job root changed; what did is put back for the next input."""
        for name, path in self.watched.items():
            changed = changed_entries(self.states[name], tree_state(path))
            if changed:
                shutil.rmtree(path)
                shutil.copytree(os.path.join(self.workdir, "pristine", name), path, symlinks=True)
                self.states[name] = tree_state(path)
                where = re.sub(r"[0-9a-f]{12}|\d+", "N", f"{name}: {os.path.basename(changed[-1])}")
                raise PropertyFailure(f"cache read changed {where}", f"changed {changed[:6]}; planted {case['plants']}")
        if sorted(set(os.listdir(self.workdir)) | {"cache", "jobs"}) != self.top:
            raise PropertyFailure("cache read wrote beside the cache", f"{sorted(os.listdir(self.workdir))}")

    def _plant(self, case: dict[str, Any], remote: str) -> None:
        for (name, data), fill in zip(self.files[case["remote"]].items(), case["prefill"]):
            if fill:  # what an earlier read left: zips and raw files
                os.makedirs(os.path.dirname(os.path.join(self.cache, name)), exist_ok=True)
                Path(self.cache, name).write_bytes(data)
        real = os.path.realpath(self.cache) + os.sep
        for plant in sorted(case["plants"], key=lambda p: -p[1].count("/")):  # deepest first: never through a link
            path = os.path.join(self.cache, plant[1])
            parent = os.path.dirname(path)
            if not os.path.realpath(parent).startswith(real) and os.path.realpath(parent) + os.sep != real:
                continue  # this input's own links lead the parent elsewhere: planting there would write outside
            if os.path.lexists(parent) and not os.path.isdir(parent):
                continue
            os.makedirs(parent, exist_ok=True)
            if os.path.lexists(path):
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            if plant[0] == "link":
                target = os.path.join(self.workdir, plant[2])
                os.symlink(os.path.relpath(target, os.path.dirname(path)) if plant[3] else target, path)
            elif plant[0] == "file":
                Path(path).write_bytes(b"\xa5" * plant[2])
            else:
                os.mkdir(path)
        if case["index"] is not None:
            _put_back(os.path.join(remote, "index.json"), case["index"])

    def _read(self, case: dict[str, Any], remote: str) -> None:
        text = case["index"] if case["index"] is not None else self.texts[case["remote"]]
        shards = parse_index(text, "fuzz/index.json")
        largest = max((s.raw_data.bytes for s in shards), default=0)
        if case["read"] == "streaming":
            limit = len(text) + 4 * largest if case["limited"] else None
            where = {"remote": remote, "local": self.cache, "job_root": self.jobs, "keep_zip": case["keep_zip"]}
            dataset = StreamingDataset(**where, batch_size=1, telemetry=False, download_retry=0, cache_limit=limit)
            for index in case["picks"]:
                attempt(dataset.__getitem__, index)
            attempt(lambda: sum(1 for _ in dataset))
        elif case["read"] == "ensure":
            limit = 2 * largest + 1 if case["limited"] else None
            cache = ShardCache(
                open_store(remote, retry=1), self.cache, shards, keep_zip=case["keep_zip"], cache_limit=limit
            )
            try:
                for index in case["picks"] if shards else []:  # a shard the index has (the caller's promise)
                    attempt(cache.ensure, index % len(shards))
            finally:
                cache.close()
        else:
            for shard in shards:
                attempt(raw_shard_path, self.cache, shard, self.cache if case["limited"] else None)


def _cached_files(remote: str, shards: list[Any]) -> dict[str, bytes]:
    """Every file a full read leaves in the cache (zips and raw files), by basename."""
    from mds_core.format.compression import get_codec

    files = {}
    for shard in shards:
        for info in shard.files:
            if os.path.exists(os.path.join(remote, info.basename)):
                files[info.basename] = Path(remote, info.basename).read_bytes()
        if shard.zip_data is not None:
            codec = get_codec(shard.compression)
            assert codec is not None
            files[shard.raw_data.basename] = codec.decompress(files[shard.zip_data.basename])
    return dict(sorted(files.items()))


def _put_back(path: str, data: bytes) -> None:
    """Write ``data`` over the remote's index keeping its mtime (the remote is watched for changes)."""
    stat = os.stat(path)
    Path(path).write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
