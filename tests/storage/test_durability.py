"""Power loss at every step of writing a dataset and committing versions, simulated.

A tracer records the file system calls that decide what survives a crash: ``fsync`` of a file (its
data), ``fsync`` of a directory (the names created or renamed in it), renames and links. Replaying
every prefix of the recorded calls gives the state a power loss at that point would leave: a name
survives only once its directory was synced after it was made, a file's content only once the file
was synced. In every such state, whatever survives must be complete: an index whose shards all
survive whole, a manifest whose version index does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from mds_core import MDSWriter
from mds_core.versions import ShardSet


@dataclass
class Disk:
    """What a crash keeps: names whose directory was synced after them, and contents synced since written."""

    # A file is (inode, digest of its bytes): inodes are reused once temporary files are deleted.
    volatile: dict[str, tuple] = field(default_factory=dict)  # path -> file, as the running system sees it
    durable: dict[str, tuple] = field(default_factory=dict)  # path -> file, after a crash
    synced: set[tuple] = field(default_factory=set)  # files whose data is on disk

    def apply(self, event: tuple) -> None:
        kind = event[0]
        if kind == "fsync-file":
            self.synced.add(event[1])
        elif kind == "fsync-dir":
            directory = event[1]
            for path in [p for p in self.durable if os.path.dirname(p) == directory]:
                if path not in self.volatile:
                    del self.durable[path]
            for path, inode in self.volatile.items():
                if os.path.dirname(path) == directory:
                    self.durable[path] = inode
        elif kind in ("rename", "link"):
            _, src, dst, file = event
            self.volatile[dst] = file
            if kind == "rename":
                self.volatile.pop(src, None)

    def survives_whole(self, path: str) -> bool:
        return path in self.durable and self.durable[path] in self.synced


class Tracer:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple] = []
        self.json_of: dict[tuple, bytes] = {}  # what each index or manifest held when it got its name
        real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

        def fsync(fd: int) -> None:
            real_fsync(fd)
            path = os.readlink(f"/proc/self/fd/{fd}")
            self.events.append(("fsync-dir", path) if os.path.isdir(path) else ("fsync-file", _identity(path)))

        def replace(src: str, dst: str) -> None:
            real_replace(src, dst)
            self._record("rename", src, dst)

        def link(src: str, dst: str) -> None:
            real_link(src, dst)
            self._record("link", src, dst)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "link", link)

    def _record(self, kind: str, src: str, dst: str) -> None:
        if os.path.isdir(dst):  # a directory moved into place: its files keep their identities
            self.events.append((kind, os.path.abspath(src), os.path.abspath(dst), ("dir", dst)))
            return
        identity = _identity(dst)
        if dst.endswith(".json"):
            self.json_of[identity] = Path(dst).read_bytes()
        self.events.append((kind, os.path.abspath(src), os.path.abspath(dst), identity))

    def json_at(self, disk: Disk, path: str) -> dict:
        """The JSON file ``path`` as it would read after the crash (the version that survived)."""
        return json.loads(self.json_of[disk.durable[path]])

    def crash_states(self) -> list[Disk]:
        """The disk after a power loss following each recorded call (and before the first)."""
        disk, states = Disk(), [Disk()]
        for event in self.events:
            disk.apply(event)
            states.append(Disk(dict(disk.volatile), dict(disk.durable), set(disk.synced)))
        return states


def _identity(path: str) -> tuple:
    return os.stat(path).st_ino, hashlib.sha1(Path(path).read_bytes()).hexdigest()


def _write(out: str, samples: int = 60) -> None:
    rng = np.random.default_rng(samples)
    with MDSWriter(out=out, columns={"id": "int", "payload": "bytes"}, size_limit=4096) as writer:
        for i in range(samples):
            writer.write({"id": i, "payload": rng.bytes(300)})


def _index_complete(tracer: Tracer, disk: Disk, index_path: str, root: str) -> bool:
    """Every shard the surviving index at ``index_path`` names (relative to ``root``) survives whole."""
    shards = tracer.json_at(disk, index_path)["shards"]
    return all(
        disk.survives_whole(os.path.join(root, (s.get("zip_data") or s["raw_data"])["basename"])) for s in shards
    )


def test_a_power_loss_at_any_step_of_a_write_never_leaves_an_index_without_its_shards(tmp_path, monkeypatch):
    tracer = Tracer(monkeypatch)
    out = str(tmp_path / "data")
    _write(out)
    index = os.path.join(out, "index.json")
    states = tracer.crash_states()
    assert states[-1].survives_whole(index)  # once the writer returned, the whole dataset is durable
    assert _index_complete(tracer, states[-1], index, out)
    for disk in states:
        if index in disk.durable:
            assert disk.survives_whole(index) and _index_complete(tracer, disk, index, out)


def test_a_power_loss_at_any_step_of_commits_and_publishes_keeps_every_visible_version_whole(tmp_path, monkeypatch):
    tracer = Tracer(monkeypatch)
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    for count in (30, 20):
        with shard_set.transaction("append") as tx:
            _write(tx.out, count)
    published = os.path.join(root, "index.json")
    manifests = sorted(str(p) for p in Path(root, "_versions").glob("0*.json") if not p.name.count(".") > 1)
    assert len(manifests) == 2
    states = tracer.crash_states()
    assert all(states[-1].survives_whole(m) for m in manifests) and states[-1].survives_whole(published)
    for disk in states:
        for manifest in manifests:
            if manifest in disk.durable:  # a visible version: its index and every shard survive whole
                assert disk.survives_whole(manifest)
                version_index = os.path.join(root, tracer.json_at(disk, manifest)["index"])
                assert disk.survives_whole(version_index) and _index_complete(tracer, disk, version_index, root)
        if published in disk.durable:
            assert disk.survives_whole(published) and _index_complete(tracer, disk, published, root)


def test_without_syncing_file_data_the_simulation_finds_an_index_naming_lost_shards(tmp_path, monkeypatch):
    """The check can fail: names synced but contents not (a rename without fsync) leave a surviving
    index whose shards would read back empty."""
    tracer = Tracer(monkeypatch)
    monkeypatch.setattr("mds_core.storage.files.fsync_file", lambda path: None)
    out = str(tmp_path / "data")
    _write(out)
    index = os.path.join(out, "index.json")
    states = tracer.crash_states()
    assert index in states[-1].durable
    assert not states[-1].survives_whole(index) and not _index_complete(tracer, states[-1], index, out)


_WRITE_WITH_UMASK = """
import os, sys
os.umask(int(sys.argv[2], 8))
from mds_core import MDSWriter
from mds_core.versions import ShardSet
with MDSWriter(out=os.path.join(sys.argv[1], "plain"), columns={"id": "int"}, size_limit=64) as writer:
    for i in range(20):
        writer.write({"id": i})
with ShardSet(os.path.join(sys.argv[1], "set")).transaction("append") as tx:
    with MDSWriter(out=tx.out, columns={"id": "int"}) as writer:
        writer.write({"id": 0})
"""


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_published_files_get_the_usual_permissions(tmp_path: Path, umask: int) -> None:
    """Readable by a training job running as another user, as the umask allows (mkstemp's 0600 was not)."""
    subprocess.run(
        [sys.executable, "-c", _WRITE_WITH_UMASK, str(tmp_path), oct(umask)],
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 8 and any(p.name == "published.json" for p in files)
    assert {p.stat().st_mode & 0o777 for p in files} == {0o666 & ~umask}
