"""What must hold in a shard set or dataset whatever step its writer died at."""

from __future__ import annotations

import uuid
from pathlib import Path

from mds_core import StreamingDataset
from mds_core.format.index import INDEX_BASENAME
from mds_core.format.verify import verify_dataset
from mds_core.storage.urls import is_remote
from mds_core.versions import ShardSet
from mds_core.versions.manifest import HEAD, PUBLISHED, manifest_name


def read_ids(root: str, tmp: Path, version: int | None = None) -> list[int]:
    """Every sample of a version (or of the root's ``index.json``), each file's digest checked."""
    dataset = StreamingDataset(
        remote=root,
        local=str(tmp / f"read-{uuid.uuid4().hex[:8]}"),
        version=version,
        batch_size=1,
        shuffle=False,
        validate_hash="xxh64",
        job_root=str(tmp / "jobs"),
    )
    return [int(sample["id"]) for sample in dataset]


def check_versions(root: str, tmp: Path, expected: dict[int, list[int]]) -> int | None:
    """(a) and (b): every visible version is one we expect and reads completely; so does the
    published one, through the root's ``index.json`` as plain MDS readers see it. Returns it."""
    shard_set = ShardSet(root)
    for info in shard_set.versions():
        assert info.version in expected, f"version {info.version} should not exist"
        assert read_ids(root, tmp, info.version) == expected[info.version]
    published = shard_set.published()
    if published is None:
        assert not shard_set.store.exists(INDEX_BASENAME)
        return None
    assert read_ids(root, tmp) == expected[published]
    if not is_remote(root):
        report = verify_dataset(root, decode=True)
        assert report.ok and report.hashes_checked > 0, report.problems
    return published


def needed_files(shard_set: ShardSet) -> set[str]:
    """Exactly what the committed versions and the published pointer need: nothing else may stay."""
    needed = {INDEX_BASENAME, PUBLISHED} | ({HEAD} if shard_set.store.exists(HEAD) else set())  # the hint
    for info in shard_set.versions():
        needed |= {manifest_name(info.version), info.index}
        needed |= {f.basename for s in shard_set.shards(info.version) for f in (s.raw_data, s.zip_data) if f}
    return needed


def uncommitted_transactions(shard_set: ShardSet) -> list[str]:
    """Transaction folders under ``data/`` that no version commits (a writer died, or has not finished)."""
    committed = {info.transaction for info in shard_set.versions()}
    folders = {name.split("/")[1] for name in shard_set.store.list("data")}
    return sorted(folders - committed)
