"""Finding 5 of the review: ``mds versions vacuum`` deleted everything under ROOT that no version named."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mds_core.cli import main
from mds_core.errors import ConfigurationError
from mds_core.versions import ShardSet
from tests.security.conftest import commit_ids, write_ids

HOURS_AGO = 3


def _aged(root: Path) -> list[str]:
    """Every file under ``root``, made three hours old (past vacuum's one-hour grace)."""
    then = time.time() - HOURS_AGO * 3600
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    for name in files:
        os.utime(root / name, (then, then))
    return files


def _not_a_shard_set(root: Path) -> list[str]:
    (root / "project" / "src").mkdir(parents=True)
    (root / "notes.txt").write_text("notes")
    (root / "project" / "src" / "main.py").write_text("print('hi')")
    write_ids(str(root / "other-dataset"), [1])
    return _aged(root)


def test_vacuum_of_a_folder_that_is_not_a_shard_set_deletes_nothing(tmp_path: Path) -> None:
    """The issue's third try: notes, a source tree and another dataset, all 3 h old. Before: 4 of 4 deleted."""
    files = _not_a_shard_set(tmp_path)
    for args in ([], ["--dry-run"]):
        result = CliRunner().invoke(main, ["versions", "vacuum", str(tmp_path), *args])
        assert result.exit_code == 2
        assert f"error: {tmp_path}: not a shard set (no version manifest in _versions/)" in result.output
    assert _aged(tmp_path) == files


def test_vacuum_of_the_folder_above_shard_sets_deletes_nothing(tmp_path: Path) -> None:
    """The realistic slip: the store's root (MDS_SHARD_STORE) instead of one set's."""
    commit_ids(ShardSet(str(tmp_path / "digits")), [1])
    files = _aged(tmp_path)
    with pytest.raises(ConfigurationError, match="not a shard set"):
        ShardSet(str(tmp_path)).vacuum(keep_last=1)
    assert _aged(tmp_path) == files


def test_vacuum_leaves_what_is_not_in_the_sets_own_folders(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path))
    for ids in (range(3), range(3, 6)):
        commit_ids(shard_set, ids)
    (tmp_path / "README.txt").write_text("what this set is")
    (tmp_path / "index.json.bak").write_text("a copy of someone's")
    (tmp_path / "data" / "stray.bin").write_bytes(b"debris")
    # What a writer killed while publishing leaves in the root: a temporary copy of index.json.
    (tmp_path / "index.json.4242.0f23dbb8.tmp").write_bytes(b"{")
    _aged(tmp_path)
    report = shard_set.vacuum(keep_last=1)
    assert report.removed_versions == [1]
    assert {"data/stray.bin", "index.json.4242.0f23dbb8.tmp"} <= set(report.removed_files)
    assert all(n.startswith(("data/", "_versions/", "index.json.4242.")) for n in report.removed_files)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["README.txt", "index.json", "index.json.bak"]
    assert not (tmp_path / "data" / "stray.bin").exists()


def test_force_vacuums_an_unfinished_first_commit(tmp_path: Path) -> None:
    debris = tmp_path / "data" / "20261201T000000-deadbeef" / "shard.00000.mds"
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"x")
    (tmp_path / "keep.txt").write_text("mine")
    _aged(tmp_path)
    result = CliRunner().invoke(main, ["versions", "vacuum", str(tmp_path), "--force"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{tmp_path}: kept versions []; removed versions []; deleted 1 files")
    assert not debris.exists() and (tmp_path / "keep.txt").exists()
