"""Fuzz target for hostile shard sets: a versioned set whose metadata, names and links an input rewrites,
then every ``ShardSet`` operation, the deleting ones included.

The set has three committed versions (the third partitioned), verdicts, and files of other owners
inside its root but outside ``data/`` and ``_versions/`` (``README.txt``, ``notes/``, ``datax/``,
``_versions.bak/``), with a sentinel folder beside the root. Each input restores it, then changes a
few things: a manifest, ``published.json``, ``head.json``, a verdict or an index mutated, or given
fields that name the sentinels; odd names in ``_versions/`` (200 digits, other scripts' digits,
``00000009.json/`` as a folder, spaces, signs); symbolic links in ``data/`` and ``_versions/`` (a
manifest, a transaction's folder, a verdict folder) to the sentinels. Then a few operations:
``versions``, ``latest``, ``published``, ``version``, ``diff``, ``vacuum`` (real deletes, with
``keep_last`` or ``force``), ``rollback``, ``publish``, ``record_verdict``, ``verdict``, and a pinned
``StreamingDataset`` read of the set. Only ``MDSError`` may escape; after each operation, no sentinel
may have changed (a failure names the operation), and nothing may appear beside the root but the read's
cache and job folders. The set is written with fixed transaction ids and times, so every setup holds
the same bytes under the same names and a kept input replays anywhere.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from mds_core import StreamingDataset
from mds_core.errors import MDSError
from mds_core.versions import ShardSet
from mds_core.versions.manifest import manifest_name
from mds_core.versions.partitions import partition_folder
from tests.fuzz.checks import changed_entries, tree_state
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_json, mutate_record
from tests.fuzz.seeds import write_rows

SENTINELS = {"README.txt": b"the set's owner", "notes/keep.bin": b"\x00\x01", "datax/keep": b"k"}
SENTINELS["_versions.bak/1.json"] = b"{}"
BESIDE = {"precious": b"beside the root", "dir/keep": b"keep"}
# Where a hostile manifest's ``index`` or partition list, or a link, may point.
TARGETS = ["README.txt", "notes/keep.bin", "notes", "datax/keep", "_versions.bak/1.json", "../beside/precious"]
TARGETS += ["../beside", "../beside/dir", ".", "data", "_versions", "index.json", "_versions/published.json"]
# Names in _versions/ that are not manifests, or are, oddly (a file name holds at most 255 bytes: 200 digits).
ODD_NAMES = """٣.json ０１.json 00000009.json/x -1.json +1.json 1_0.json 00000004.json 4.json 1.json.json
    00000002.json.tmp checks/2/../x.json""".split()
ODD_NAMES += ["9" * 200 + ".json", "0000 0001.json", " 1.json"]
CHECKS = ["smoke", "loader_smoke", "a.b-c_d", "../x", "a/b", "", ".", "..", "x" * 129, "ok.json", "\x00", "é"]
VERSIONS = [1, 2, 3, 4, 0, -1, 10**20, 2**63]
COMMITS = [("overwrite", 0, 6, None), ("append", 6, 4, None), ("append", 10, 3, "p1")]  # the last partitioned
OLD = 1_600_000_000  # the time every file of the set and every sentinel is dated


class ShardSetTarget:
    """A versioned shard set rewritten by each input -> every ``ShardSet`` operation; the sentinels survive."""

    name = "shardset"

    def setup(self, workdir: str) -> None:
        self.workdir, self.root = workdir, os.path.join(workdir, "set")
        self.pristine = os.path.join(workdir, "pristine")
        if not os.path.exists(self.pristine):
            # Fixed transaction ids and creation times: every setup writes the same bytes under the same names,
            # so input i is the same in every process, and a kept case replays in another setup.
            shard_set = ShardSet(self.pristine, retry=1)
            for number, (mode, first, rows, key) in enumerate(COMMITS, 1):
                transaction = f"20260101T00000{number}-0000000{number}"
                folder = partition_folder(transaction, key) if key else f"data/{transaction}"
                write_rows(os.path.join(self.pristine, folder), range(first, first + rows), size_limit=200)
                shard_set.commit(transaction, mode, partitions=[key] if key else None)
                path = Path(self.pristine, manifest_name(number))
                manifest = {**json.loads(path.read_bytes()), "created": f"2026-01-01T00:00:0{number}+00:00"}
                path.write_bytes(json.dumps(manifest, indent=1).encode())
            shard_set.publish(2)
            shard_set.publish(3)
            shard_set.record_verdict(2, "smoke", {"passed": True})
            shard_set.record_verdict(3, "smoke", {"passed": False, "why": ["slow"]})
        # The set and its sentinels as bytes, laid out afresh for each input (faster than copying files).
        self.image = _image(self.pristine) + list(SENTINELS.items())
        self.metadata = sorted(n for n, d in self.image if n.endswith(".json") and d is not None and n not in SENTINELS)
        self.files = {n: d for n, d in self.image if n in self.metadata and d is not None}
        for folder in (self.root, os.path.join(workdir, "beside")):
            shutil.rmtree(folder, ignore_errors=True)
        _lay_out(self.root, self.image)
        _lay_out(os.path.join(workdir, "beside"), list(BESIDE.items()))
        self.sentinel_state = _sentinels(self.root)
        self.beside_state = tree_state(os.path.join(workdir, "beside"))
        self.cache, self.jobs = os.path.join(workdir, "cache"), os.path.join(workdir, "jobs")
        self.top = sorted(set(os.listdir(workdir)) | {"set", "cache", "jobs"})

    def generate(self, rng: random.Random) -> dict[str, Any]:
        changes: list[list[Any]] = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            how = rng.random()
            name = rng.choice(self.metadata)
            if how < 0.35:
                changes.append(["write", name, mutate_record(rng, self.files[name])])
            elif how < 0.55:  # a manifest whose fields name the sentinels
                manifests = [n for n in self.metadata if n.count(".") == 1 and n.startswith("_versions/0")]
                name = rng.choice(manifests)
                manifest = json.loads(self.files[name])
                field = rng.choice(("index", "partitions", "transaction", "version"))
                manifest[field] = {
                    "index": rng.choice(TARGETS),
                    "partitions": {"p1": [rng.choice(TARGETS)], rng.choice(("..", "a/b", "p2")): [rng.choice(TARGETS)]},
                    "transaction": rng.choice(["..", "", "data", "../beside", *[t for t in TARGETS if "/" not in t]]),
                    "version": rng.choice(VERSIONS),
                }[field]
                changes.append(["write", name, json.dumps(manifest).encode()])
            elif how < 0.7:
                data = rng.choice([*self.files.values(), b"{}", b"[" * 100_000, b'{"version": 4}'])
                changes.append(["write", "_versions/" + rng.choice(ODD_NAMES), data])
            elif how < 0.9:  # a link where the set keeps its own files
                places = "data/lnk _versions/checks _versions/checks/2 _versions/checks/4 _versions/lnk.json".split()
                folders = [n.rsplit("/", 1)[0] for n in self.metadata if n.startswith("data/")]
                place = rng.choice([*self.metadata, *places, *folders])
                changes.append(["link", place, rng.choice(TARGETS)])
            else:
                changes.append(["write", "_versions/head.json", json.dumps({"version": rng.choice(VERSIONS)}).encode()])
        operations = [[rng.choice(OPERATIONS), rng.choice(VERSIONS[:5]), rng.choice(VERSIONS[:5])] for _ in range(3)]
        for operation in operations:
            if operation[0] == "record_verdict":
                operation.append(rng.choice(CHECKS))
                operation.append(mutate_json(rng, {"passed": True, "rows": 10, "notes": ["a", {"b": None}]}))
            elif operation[0] == "verdict":
                operation.append(rng.choice(CHECKS))
        read, keep_last = rng.random() < 0.08, rng.choice((1, 2))
        return {"changes": changes, "operations": operations, "read": read, "keep_last": keep_last}

    def check(self, case: dict[str, Any]) -> None:
        for folder in (self.root, self.cache):
            shutil.rmtree(folder, ignore_errors=True)
        _lay_out(self.root, self.image)
        os.mkdir(self.cache, 0o700)
        for change in case["changes"]:
            self._change(change)
        shard_set = ShardSet(self.root, retry=1)
        steps: list[tuple[Any, ...]] = [
            (op[0], _operate, shard_set, op, case["keep_last"]) for op in case["operations"]
        ]
        steps += [("pinned read", self._pinned_read, case["operations"][0][1])] if case["read"] else []
        for name, call, *args in steps:  # each step checked on its own: a failure names the operation
            try:
                call(*args)
            except MDSError:
                pass
            finally:
                self._check_outside(name, case)
        if sorted(set(os.listdir(self.workdir)) | {"set", "cache", "jobs"}) != self.top:
            raise PropertyFailure("shard set wrote beside its root", f"{sorted(os.listdir(self.workdir))}")

    def _check_outside(self, operation: str, case: dict[str, Any]) -> None:
        """The sentinels inside the root (outside the set's folders) and beside it are as they were."""
        beside = os.path.join(self.workdir, "beside")
        changed = changed_entries(self.sentinel_state, _sentinels(self.root))
        changed += ["beside/" + n for n in changed_entries(self.beside_state, tree_state(beside))]
        if changed:
            shutil.rmtree(beside)
            _lay_out(beside, list(BESIDE.items()))
            raise PropertyFailure(
                f"{operation} wrote outside the set's folders", f"changed {changed[:6]}; input {case['changes']}"
            )

    def _change(self, change: list[Any]) -> None:
        path = os.path.normpath(os.path.join(self.root, change[1]))
        parent = os.path.dirname(path)
        real = os.path.join(os.path.realpath(self.root), os.path.relpath(parent, self.root))
        if os.path.realpath(parent) != os.path.normpath(real) or os.path.isfile(parent):
            return  # an earlier change's link leads there (writing through it is not the set's doing), or a file
        os.makedirs(parent, exist_ok=True)
        if os.path.lexists(path):
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        if change[0] == "write":
            Path(path).write_bytes(change[2])
        else:
            os.symlink(os.path.relpath(os.path.join(self.root, change[2]), os.path.dirname(path)), path)

    def _pinned_read(self, version: int) -> None:
        where: dict[str, Any] = {"remote": self.root, "local": self.cache, "job_root": self.jobs, "version": version}
        sum(1 for _ in StreamingDataset(**where, batch_size=1, telemetry=False, download_retry=0))


OPERATIONS = ["versions", "latest", "published", "version", "diff", "vacuum", "vacuum_force", "rollback", "publish"]
OPERATIONS += ["record_verdict", "verdict"]


def _operate(shard_set: ShardSet, operation: list[Any], keep_last: int) -> None:
    name, first, second = operation[:3]
    if name in ("versions", "latest", "published", "rollback"):
        getattr(shard_set, name)()
    elif name in ("version", "publish"):
        getattr(shard_set, name)(first)
    elif name == "diff":
        shard_set.diff(first, second)
    elif name == "vacuum":
        shard_set.vacuum(keep_last=keep_last)
    elif name == "vacuum_force":
        shard_set.vacuum(keep_last=keep_last, force=True)
    elif name == "record_verdict":
        shard_set.record_verdict(first, operation[3], operation[4])
    else:
        shard_set.verdict(first, operation[3])


def _image(root: str) -> list[tuple[str, bytes | None]]:
    """Every folder (None) and file (its bytes) under ``root``, parents first."""
    image: list[tuple[str, bytes | None]] = []
    for parent, dirs, names in sorted(os.walk(root)):
        relative = os.path.relpath(parent, root)
        image += [(os.path.normpath(os.path.join(relative, d)), None) for d in sorted(dirs)]
        image += [(os.path.normpath(os.path.join(relative, n)), Path(parent, n).read_bytes()) for n in sorted(names)]
    return image


def _lay_out(root: str, image: list[tuple[str, bytes | None]]) -> None:
    """Write ``image`` under ``root``, everything dated ``OLD`` (past vacuum's grace: its debris goes at once)."""
    os.makedirs(root)
    for name, data in image:
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if data is None:
            os.makedirs(path, exist_ok=True)
        else:
            Path(path).write_bytes(data)
    for parent, dirs, names in os.walk(root, topdown=False):
        for name in names + dirs:
            os.utime(os.path.join(parent, name), (OLD, OLD))
    os.utime(root, (OLD, OLD))


def _sentinels(root: str) -> dict[str, tuple[Any, ...]]:
    """The root's entries that are not the set's (all but ``data/``, ``_versions/`` and its ``index.json``)."""
    state = {}
    for name in os.listdir(root):
        if name not in ("data", "_versions", "index.json"):
            state.update(
                {os.path.normpath(os.path.join(name, n)): e for n, e in tree_state(os.path.join(root, name)).items()}
            )
    return state
