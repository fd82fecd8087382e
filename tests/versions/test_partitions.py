"""Partitions (a day replaced whole), the three modes, and a base decoupled from the version number."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from mds_core import merge_index
from mds_core.errors import ConfigurationError, InvalidManifestError, PartitionExistsError, VersionConflictError
from mds_core.versions import ShardSet
from mds_core.versions.manifest import parse_manifest
from tests.versions.conftest import read_ids, write_day


def _days(shard_set: ShardSet, mode: str, days: dict[str, range], **kwargs):
    """One transaction writing each day as a partition."""
    with shard_set.transaction(mode, lineage={"days": sorted(days)}, **kwargs) as tx:
        for day, ids in days.items():
            write_day(tx.partition_out(day), day, ids)
    return tx.version


def _plain(shard_set: ShardSet, mode: str, ids: range, **kwargs):
    with shard_set.transaction(mode, **kwargs) as tx:
        write_day(tx.out, "plain", ids)
    return tx.version


def test_a_day_is_replaced_whole_and_the_others_are_carried_forward(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    v1 = _days(shard_set, "append", {"2026-11-01": range(30), "2026-11-02": range(100, 130)})
    v2 = _days(shard_set, "append", {"2026-11-03": range(200, 220)})
    assert sorted(v2.partitions) == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert v2.partitions["2026-11-01"] == v1.partitions["2026-11-01"]  # carried forward, not rewritten
    assert all(name.startswith(f"data/{v1.transaction}/part-2026-11-01/") for name in v1.partitions["2026-11-01"])
    v3 = _days(shard_set, "replace", {"2026-11-02": range(500, 510)})
    replaced = len(v3.partitions["2026-11-02"])
    assert (v3.version, v3.parent, v3.mode, v3.rows, v3.new_shards) == (3, 2, "replace", 60, replaced)
    assert all(name.startswith(f"data/{v3.transaction}/part-2026-11-02/") for name in v3.partitions["2026-11-02"])
    assert v3.partitions["2026-11-03"] == v2.partitions["2026-11-03"]
    # The base's shards less the replaced day's, then the new ones.
    expected = list(range(30)) + list(range(200, 220)) + list(range(500, 510))
    assert read_ids(root, tmp_path, 3) == expected and read_ids(root, tmp_path) == expected
    assert read_ids(root, tmp_path, 2) == list(range(30)) + list(range(100, 130)) + list(range(200, 220))
    diff = shard_set.diff(2, 3)
    assert (diff.removed_rows, diff.added_rows) == (30, 10)
    assert sorted(diff.removed_shards) == sorted(v1.partitions["2026-11-02"])
    # A key that the base lacks is simply added by a replace.
    v4 = _days(shard_set, "replace", {"2026-11-04": range(600, 605)})
    assert v4.rows == 65 and sorted(v4.partitions) == ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]
    # The manifest on the store records the partitions; the vacuum drops the replaced day's shards.
    stored = json.loads(shard_set.store.read_bytes("_versions/00000004.json"))
    assert stored["partitions"] == v4.partitions
    shard_set.vacuum(keep_last=1, grace=dt.timedelta(0))
    assert not any(name.startswith(f"data/{v1.transaction}/part-2026-11-02/") for name in shard_set.store.list("data"))
    assert read_ids(root, tmp_path) == expected + list(range(600, 605))


def test_an_append_refuses_a_day_it_has_already(root: str) -> None:
    shard_set = ShardSet(root)
    _days(shard_set, "append", {"d1": range(10), "d2": range(10, 20)})
    tx = shard_set.transaction("append")
    write_day(tx.partition_out("d2"), "d2", range(50, 55))
    write_day(tx.partition_out("d3"), "d3", range(60, 65))
    message = rf"{root}: version 1 already has partition\(s\) \['d2'\].*mode='replace'"
    with pytest.raises(PartitionExistsError, match=message), tx:
        pass
    assert [v.version for v in shard_set.versions()] == [1]
    again = shard_set.commit(tx.id, "replace")  # kept: committed by id, its partitions found in its folder
    assert (again.version, again.rows, sorted(again.partitions)) == (2, 20, ["d1", "d2", "d3"])


def test_plain_shards_keep_the_partitions_and_an_overwrite_holds_only_its_own(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    v1 = _days(shard_set, "append", {"d1": range(10)})
    v2 = _plain(shard_set, "append", range(100, 105))  # tx.out, as before partitions existed
    assert v2.partitions == v1.partitions and v2.rows == 15
    v3 = _days(shard_set, "replace", {"d1": range(20, 22)})
    assert read_ids(root, tmp_path, 3) == list(range(100, 105)) + [20, 21]  # the plain shards stay
    v4 = _days(shard_set, "overwrite", {"d9": range(900, 903)})
    assert (v4.parent, v4.rows, list(v4.partitions)) == (3, 3, ["d9"]) and v3.version == 3
    v5 = _plain(shard_set, "overwrite", range(7))
    assert v5.partitions == {} and "partitions" not in json.loads(shard_set.store.read_bytes("_versions/00000005.json"))


def test_a_partition_may_hold_a_merged_index_over_sub_folders(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    with shard_set.transaction("append") as tx:
        out = tx.partition_out("2026-11-30")
        write_day(f"{out}/0", "a", range(20))
        write_day(f"{out}/1", "b", range(20, 40))
        merge_index(out)  # what dataframe_to_mds(merge_index=True) leaves at the partition's root
    assert tx.version is not None  # committed
    names = tx.version.partitions["2026-11-30"]
    assert any("/part-2026-11-30/0/" in n for n in names) and any("/part-2026-11-30/1/" in n for n in names)
    assert sorted(read_ids(root, tmp_path)) == list(range(40))


def test_partition_mistakes_are_refused_with_the_reason(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    tx = shard_set.transaction("append")
    for key in ("", "../x", "a/b", ".hidden", "x" * 200, "day 1"):
        with pytest.raises(ConfigurationError, match="partition key"):
            tx.partition_out(key)
    with pytest.raises(ConfigurationError, match="mode='replace' replaces partitions, but the transaction wrote none"):
        _plain(shard_set, "replace", range(3))
    with pytest.raises(ConfigurationError, match="wrote both a dataset at tx.out and partitions"):
        with shard_set.transaction("append") as mixed:
            write_day(mixed.out, "plain", range(3))
            write_day(mixed.partition_out("d1"), "d1", range(3))
    with pytest.raises(ConfigurationError, match=r"partition 'd2' has no index.json"):
        with shard_set.transaction("append") as empty:
            empty.partition_out("d2")
    assert shard_set.versions() == []


def test_the_manifest_s_partitions_are_validated_strictly() -> None:
    good: dict[str, Any] = {"version": 1, "parent": None, "created": "2026-12-01T00:00:00+00:00", "mode": "append"}
    good |= {"transaction": "t", "index": "_versions/00000001.t.index.json", "columns": {}, "fingerprint": "f"}
    good |= dict.fromkeys(("rows", "shards", "raw_bytes", "stored_bytes", "new_shards"), 1)
    good |= {"writer": {}, "lineage": {}}
    assert parse_manifest(json.dumps(good).encode(), "m").partitions == {}  # older manifests have none
    ok = parse_manifest(json.dumps({**good, "partitions": {"d1": ["data/t/part-d1/shard.00000.mds"]}}).encode(), "m")
    assert ok.partitions == {"d1": ["data/t/part-d1/shard.00000.mds"]}
    bad: object  # each a wrong "partitions" value
    for bad in ([], {"d1": "x"}, {"d1": [3]}, {"d1": ["../x"]}, {"d1": ["/abs"]}, {"../k": []}, {"": []}):
        with pytest.raises(InvalidManifestError):
            parse_manifest(json.dumps({**good, "partitions": bad}).encode(), "m")


def test_a_failed_version_is_skipped_by_building_on_the_published_one(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    for day in range(4):
        _days(shard_set, "append", {f"d{day}": range(10 * day, 10 * day + 10)})
    bad = _days(shard_set, "append", {"d4": range(40, 45)}, publish=False)  # failed its smoke test
    assert (bad.version, shard_set.published()) == (5, 4)
    tx = shard_set.transaction("append", base="published", publish=False)
    assert (tx.parent, tx.seen) == (4, 5)
    with tx:
        write_day(tx.partition_out("d4"), "d4", range(400, 410))
    assert tx.version is not None  # committed
    assert (tx.version.version, tx.version.parent) == (6, 4)  # numbers only grow; the parent is the base
    assert read_ids(root, tmp_path, 6) == list(range(40)) + list(range(400, 410))
    assert read_ids(root, tmp_path, 5) == list(range(45)) and shard_set.published() == 4
    on_three = _plain(shard_set, "append", range(900, 901), base=3)
    assert (on_three.version, on_three.parent, on_three.rows) == (7, 3, 31)
    empty = _plain(shard_set, "append", range(7), base=None)
    assert (empty.version, empty.parent, empty.rows) == (8, None, 7)
    with pytest.raises(ConfigurationError, match="no version 42"):
        shard_set.transaction("append", base=42)
    with pytest.raises(ConfigurationError, match="a base version is 'latest', 'published'"):
        shard_set.transaction("append", base="newest")


def test_two_writers_on_the_published_base_one_wins_and_the_other_retries_on_it(root: str) -> None:
    shard_set = ShardSet(root)
    _plain(shard_set, "append", range(10))
    _plain(shard_set, "append", range(10, 20), publish=False)  # version 2, never published
    first, second = (shard_set.transaction("append", base="published") for _ in range(2))
    write_day(first.out, "a", range(100, 105))
    write_day(second.out, "b", range(200, 205))
    with first:
        pass
    with (
        pytest.raises(
            VersionConflictError,
            match=rf"version 3 was committed by another writer first.*"
            rf"ShardSet.commit\('{second.id}', 'append', parent=1, seen=3\)",
        ),
        second,
    ):
        pass
    again = shard_set.commit(second.id, "append", parent=1, seen=3)
    assert (again.version, again.parent, again.rows) == (4, 1, 15)
