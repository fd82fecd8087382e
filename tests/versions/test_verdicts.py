"""Check verdicts kept with a version: written, read back, kept and removed by vacuum with their version."""

from __future__ import annotations

import datetime as dt

import pytest

from mds_core.errors import ConfigurationError, InvalidManifestError
from mds_core.versions import ShardSet
from tests.versions.conftest import commit


def test_a_verdict_is_kept_with_its_version_and_read_back(root: str) -> None:
    shard_set = ShardSet(root)
    one = commit(shard_set, "overwrite", "d1", range(10)).version
    assert shard_set.verdict(one, "loader_smoke_test") is None
    shard_set.record_verdict(one, "loader_smoke_test", {"passed": False, "run_id": "r1"})
    shard_set.record_verdict(one, "loader_smoke_test", {"passed": True, "run_id": "r2"})  # the last one counts
    assert shard_set.verdict(one, "loader_smoke_test") == {"passed": True, "run_id": "r2"}
    assert shard_set.verdict(one, "training_plan") is None
    assert shard_set.store.exists(f"_versions/checks/{one}/loader_smoke_test.json")
    assert [v.version for v in shard_set.versions()] == [one]  # a verdict is not a version


def test_a_verdict_needs_an_existing_version_and_a_plain_check_name(root: str) -> None:
    shard_set = ShardSet(root)
    one = commit(shard_set, "overwrite", "d1", range(10)).version
    with pytest.raises(ConfigurationError, match="no version 7"):
        shard_set.record_verdict(7, "loader_smoke_test", {"passed": True})
    for bad in ("../published", "a/b", "", "..", "x" * 129):
        with pytest.raises(ConfigurationError, match="must be 1-128 letters"):
            shard_set.record_verdict(one, bad, {"passed": True})


def test_a_damaged_verdict_is_an_error_naming_its_file(root: str) -> None:
    shard_set = ShardSet(root)
    one = commit(shard_set, "overwrite", "d1", range(10)).version
    shard_set.store.write_bytes(f"_versions/checks/{one}/smoke.json", b"{not json")
    with pytest.raises(InvalidManifestError, match=rf"checks/{one}/smoke.json: the verdict is not JSON"):
        shard_set.verdict(one, "smoke")
    shard_set.store.write_bytes(f"_versions/checks/{one}/smoke.json", b"[true]")
    with pytest.raises(InvalidManifestError, match="the verdict is a list, not an object"):
        shard_set.verdict(one, "smoke")


def test_vacuum_keeps_the_verdicts_of_kept_versions_and_removes_the_others(root: str) -> None:
    shard_set = ShardSet(root)
    numbers = [commit(shard_set, "append", f"d{i}", range(i * 10, i * 10 + 10)).version for i in range(3)]
    for number in numbers:
        shard_set.record_verdict(number, "loader_smoke_test", {"passed": True, "run_id": f"r{number}"})
    report = shard_set.vacuum(keep_last=1, grace=dt.timedelta(0))
    assert report.removed_versions == numbers[:2]
    assert {f"_versions/checks/{n}/loader_smoke_test.json" for n in numbers[:2]} <= set(report.removed_files)
    assert shard_set.verdict(numbers[2], "loader_smoke_test") == {"passed": True, "run_id": f"r{numbers[2]}"}
    assert shard_set.verdict(numbers[0], "loader_smoke_test") is None
