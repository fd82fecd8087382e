"""Finding 2 and 6 of the review: the per-user folders in a shared temp folder, tried by two real users.

mallory (uid 2001) gets to the shared, sticky temp folder first; alice (uid 2002) then streams with
the default cache and job folder. Every try must end in alice's refusal, or in her private folder,
never in her reading or writing what mallory prepared.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.errors import UnsafePathError
from mds_core.format.compression import get_codec
from mds_core.versions import ShardSet
from tests.security.conftest import commit_ids, write_ids
from tests.security.users import ALICE, MALLORY, as_user, readable_by_all, shared_temp, tree

pytestmark = pytest.mark.usefixtures("loaded")


def _zstd(data: bytes) -> bytes:
    """``data`` compressed as the writer compresses a zstd shard."""
    codec = get_codec("zstd")
    assert codec is not None
    return codec.compress(data)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One read as root first: a child that dropped privileges cannot import what is imported lazily."""
    base = tmp_path_factory.mktemp("warm")
    _dataset(str(base / "remote"), [1, 2])
    _ids(StreamingDataset(remote=str(base / "remote"), local=str(base / "cache"), batch_size=1, job_root=str(base)))


@pytest.fixture
def shared() -> Iterator[str]:
    with shared_temp() as path:
        yield path


def _dataset(out: str, ids: list[int]) -> str:
    return write_ids(out, ids, hashes=["sha1"])


def _ids(dataset: StreamingDataset) -> list[int]:
    return [int(sample["x"]) for sample in dataset]


def _cache_key(remote: str) -> str:
    return hashlib.sha256(f"{remote}\0".encode()).hexdigest()[:16]


def _alice_folder(shared: str) -> str:
    return os.path.join(shared, f"mds-{ALICE}")


def test_a_cache_folder_another_user_made_first_is_refused_and_left_untouched(shared: str) -> None:
    """The issue's fifth try (PoC A): mallory's 0777 folder with a forged shard of the right size.

    Before the fix alice read mallory's values, with validate_hash, and wrote 7 entries into her folder."""
    remote = readable_by_all(_dataset(os.path.join(shared, "remote"), [1, 2, 3, 4]))
    forged = _dataset(os.path.join(shared, "forged"), [666, 667, 668, 669])
    planted = os.path.join(_alice_folder(shared), "cache", _cache_key(remote))

    def plant() -> None:
        os.umask(0)
        os.makedirs(planted, mode=0o777)
        with open(os.path.join(forged, "shard.00000.mds"), "rb") as src:
            Path(planted, "shard.00000.mds").write_bytes(src.read())

    assert as_user(MALLORY, shared, plant) is None
    before = tree(_alice_folder(shared))
    outcome = as_user(ALICE, shared, lambda: _ids(StreamingDataset(remote=remote, batch_size=1, validate_hash="sha1")))
    assert outcome[:2] == ("error", "UnsafeFolderError"), outcome
    assert _alice_folder(shared) in outcome[2] and f"uid {MALLORY}" in outcome[2]
    assert tree(_alice_folder(shared)) == before  # nothing of alice's went in


def test_a_planted_version_index_and_symlink_never_write_into_alices_files(shared: str) -> None:
    """PoC B: a planted index for version 1, whose raw basename runs through mallory's symlink into a
    0700 folder of alice's. Before the fix alice wrote mallory's bytes there, as herself."""
    root = os.path.join(shared, "set")
    commit_ids(ShardSet(root), [1, 2, 3])
    readable_by_all(root)
    private = os.path.join(shared, "alice-private")
    os.mkdir(private, 0o700)
    os.chown(private, ALICE, ALICE)
    planted = os.path.join(_alice_folder(shared), "cache", _cache_key(f"{root}@1"))
    payload = b"echo owned-by-mallory\n"

    def plant() -> None:
        os.umask(0)
        os.makedirs(os.path.join(planted, ".mds-cache"), mode=0o777)
        Path(planted, "z.zstd").write_bytes(_zstd(payload))
        os.symlink(private, os.path.join(planted, "alicedir"))
        zip_data = {"basename": "z.zstd", "bytes": os.path.getsize(os.path.join(planted, "z.zstd")), "hashes": {}}
        raw_data = {"basename": "alicedir/.profile_append", "bytes": len(payload), "hashes": {}}
        shard = {
            "column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8], "compression": "zstd",
            "format": "mds", "hashes": [], "raw_data": raw_data, "samples": 1, "size_limit": None,
            "version": 2, "zip_data": zip_data,
        }  # fmt: skip
        index = json.dumps({"shards": [shard], "version": 2}).encode()
        Path(planted, "index.json").write_bytes(index)
        record = {"remote": root, "version": 1, "index_sha256": hashlib.sha256(index).hexdigest()}
        Path(planted, ".mds-cache", "version-index.json").write_bytes(json.dumps(record).encode())

    assert as_user(MALLORY, shared, plant) is None
    outcome = as_user(ALICE, shared, lambda: StreamingDataset(remote=root, version=1, batch_size=1)[0])
    assert outcome[:2] == ("error", "UnsafeFolderError"), outcome
    assert os.listdir(private) == []


def test_a_folder_another_user_locked_is_a_clear_error_not_a_crash(shared: str, tmp_path: Path) -> None:
    """PoC C: mallory's 0700 folder under alice's name. Before the fix: an uncaught PermissionError."""
    local = _dataset(str(tmp_path / "local"), [1, 2])
    readable_by_all(str(tmp_path))
    os.chmod(tmp_path, 0o755)
    os.chmod(tmp_path.parent, 0o755)
    os.chmod(tmp_path.parent.parent, 0o755)
    assert as_user(MALLORY, shared, lambda: os.mkdir(_alice_folder(shared), 0o700)) is None
    outcome = as_user(ALICE, shared, lambda: _ids(StreamingDataset(local=local, batch_size=1)))
    assert outcome[:2] == ("error", "UnsafeFolderError"), outcome
    assert "MDS_JOB_ROOT" in outcome[2] and _alice_folder(shared) in outcome[2]


def test_a_symlink_in_place_of_the_folder_is_refused(shared: str) -> None:
    remote = _dataset(os.path.join(shared, "remote"), [1, 2])
    readable_by_all(remote)
    elsewhere = os.path.join(shared, "elsewhere")

    def plant() -> None:
        os.mkdir(elsewhere, 0o777)
        os.symlink(elsewhere, _alice_folder(shared))

    assert as_user(MALLORY, shared, plant) is None
    os.chmod(elsewhere, 0o777)
    outcome = as_user(ALICE, shared, lambda: _ids(StreamingDataset(remote=remote, batch_size=1)))
    assert outcome[:2] == ("error", "UnsafeFolderError"), outcome
    assert os.listdir(elsewhere) == []


def test_the_default_cache_is_private_wherever_the_job_root_is(shared: str) -> None:
    """Finding 6: with the job root elsewhere, the cache was 0755 and its shards 0644: mallory read them."""
    remote = readable_by_all(_dataset(os.path.join(shared, "remote"), [7, 8, 9]))
    jobs = os.path.join(shared, "alice-jobs")
    os.mkdir(jobs, 0o700)
    os.chown(jobs, ALICE, ALICE)

    def read() -> list[int]:
        os.environ["MDS_JOB_ROOT"] = jobs
        return _ids(StreamingDataset(remote=remote, batch_size=1))

    assert as_user(ALICE, shared, read) == [7, 8, 9]
    folder = _alice_folder(shared)
    assert (os.stat(folder).st_uid, os.stat(folder).st_mode & 0o777) == (ALICE, 0o700)
    shard = os.path.join(folder, "cache", _cache_key(remote), "shard.00000.mds")
    outcome = as_user(MALLORY, shared, lambda: open(shard, "rb").read())
    assert outcome[:2] == ("error", "PermissionError"), outcome


def test_alices_own_folder_from_an_older_release_is_tightened_not_refused(shared: str) -> None:
    """An earlier mds_core made the cache's user folder 0755: it is alice's, and nobody else could write
    in it, so it is kept and made 0700. Her own folder left writable by others is refused: others may
    have put files in it."""
    remote = readable_by_all(_dataset(os.path.join(shared, "remote"), [1]))
    folder = _alice_folder(shared)

    def read_with(mode: int) -> object:
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, mode)
        try:
            return _ids(StreamingDataset(remote=remote, batch_size=1)), oct(os.stat(folder).st_mode & 0o777)
        except Exception as err:
            return type(err).__name__, str(err)

    assert as_user(ALICE, shared, lambda: read_with(0o755)) == ([1], "0o700")
    refused = as_user(ALICE, shared, lambda: read_with(0o777))
    assert refused[0] == "UnsafeFolderError" and "writable by other users" in refused[1]


def test_a_remote_index_cannot_write_through_a_symlink_in_the_users_own_cache(tmp_path: Path) -> None:
    """Containment, one user: a cache folder of the user's own with a symlinked subfolder, and an index
    whose raw basename runs through it. The write is refused; the folder it points at stays empty."""
    remote = tmp_path / "remote"
    payload = _dataset(str(tmp_path / "real"), [5])
    raw = Path(payload, "shard.00000.mds").read_bytes()
    remote.mkdir()
    Path(remote, "z.zstd").write_bytes(_zstd(raw))
    index = json.loads(Path(payload, "index.json").read_text())
    shard = index["shards"][0]
    shard["compression"] = "zstd"
    shard["zip_data"] = {"basename": "z.zstd", "bytes": os.path.getsize(remote / "z.zstd"), "hashes": {}}
    shard["raw_data"]["basename"] = "sub/shard.mds"
    shard["hashes"] = []
    shard["raw_data"]["hashes"] = {}
    Path(remote, "index.json").write_text(json.dumps(index))
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    cache.mkdir(mode=0o700)
    outside.mkdir()
    (cache / "sub").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"sub/shard.mds.* outside .*cache"):
        _ids(StreamingDataset(remote=str(remote), local=str(cache), batch_size=1, job_root=str(tmp_path)))
    assert list(outside.iterdir()) == []
    fresh = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache2"), batch_size=1, job_root=str(tmp_path))
    assert _ids(fresh) == [5]


def test_a_linked_cache_folder_never_takes_the_locks_and_ledger_elsewhere(tmp_path: Path) -> None:
    """Found by the fuzzing campaign: ``.mds-cache`` a link out of the cache; the locks and the ledger
    (memory-mapped read-write) followed it."""
    remote = _dataset(str(tmp_path / "remote"), [1, 2])
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    cache.mkdir(mode=0o700)
    outside.mkdir()
    (cache / ".mds-cache").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"\.mds-cache: resolves to .*outside"):
        _ids(StreamingDataset(remote=remote, local=str(cache), batch_size=1, cache_limit="1mb", job_root=str(tmp_path)))
    assert list(outside.iterdir()) == []


def test_a_shard_set_on_disk_is_never_written_through_a_linked_folder(tmp_path: Path) -> None:
    """Found by the fuzzing campaign: a verdict recorded through ``_versions/checks/1`` linked elsewhere."""
    root, beside = tmp_path / "set", tmp_path / "beside"
    shard_set = ShardSet(str(root))
    commit_ids(shard_set, [1])
    beside.mkdir()
    (root / "_versions" / "checks").mkdir()
    (root / "_versions" / "checks" / "1").symlink_to(beside)
    with pytest.raises(UnsafePathError, match=r"checks/1/smoke\.json: a folder on its way from .* is a symbolic link"):
        shard_set.record_verdict(1, "smoke", {"passed": True})
    assert list(beside.iterdir()) == []
