"""Incremental by table version: real Delta tables written by deltalake, their commits classified and converted."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta_changes import AddedFile, partition_predicate, plan_increment
from mds_core.convert.delta_increment import convert_added_files, convert_partitions
from mds_core.convert.delta_log import latest_delta_version
from mds_core.errors import DeltaTableError, DeltaTableNotFoundError
from tests.delta.tables import ids, recorded, rows

deltalake = pytest.importorskip("deltalake")
write = deltalake.write_deltalake


def _partitioned(path: Path) -> str:
    """Version 0: ids 0..2 on days a, b, a; versions 1 and 2 append ids 3, 4 (day b) and 5 (day c)."""
    write(path, pa.table({"id": ids(3), "day": ["a", "b", "a"]}), partition_by=["day"])
    write(path, pa.table({"id": ids(2, 3), "day": ["b", "b"]}), mode="append")
    write(path, pa.table({"id": ids(1, 5), "day": ["c"]}), mode="append")
    return str(path)


def test_appends_plan_the_added_files_and_convert_exactly_their_rows(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    plan = plan_increment(table, 0)
    assert (plan.from_version, plan.to_version, plan.mode) == (0, 2, "append")
    assert plan.reason == "versions 1..2 only append: 2 file(s) added"
    assert [(f.version, f.partition_values, f.rows) for f in plan.added_files] == [
        (1, {"day": "b"}, 2),
        (2, {"day": "c"}, 1),
    ]
    assert plan.touched_partitions == []
    record = recorded(table, 0)
    result = convert_added_files(table, plan.added_files, tmp_path / "new", version=plan.to_version, recorded=record)
    assert (result.version, result.stats.rows, result.table_id, result.schema) == (2, 3, *_id_schema(record))
    assert rows(tmp_path / "new") == [{"id": 3, "day": "b"}, {"id": 4, "day": "b"}, {"id": 5, "day": "c"}]


def test_a_plan_up_to_a_given_version_and_an_up_to_date_one(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    one = plan_increment(table, 0, 1)
    assert (one.mode, [f.version for f in one.added_files], one.reason) == (
        "append",
        [1],
        "version 1 only append: 1 file(s) added",
    )
    same = plan_increment(table, 2)
    assert (same.mode, same.to_version, same.reason) == ("none", 2, "version 2 is already recorded")
    with pytest.raises(DeltaTableError, match="cannot plan from version 2 back to version 1"):
        plan_increment(table, 2, 1)


def test_a_delete_replaces_the_partitions_it_touched(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    deltalake.DeltaTable(table).delete("id = 0")  # version 3, day a
    write(table, pa.table({"id": ids(1, 6), "day": ["d"]}), mode="append")  # version 4
    write(table, pa.table({"id": ids(1, 7), "day": ["a"]}), mode="append")  # version 5, into the touched day
    plan = plan_increment(table, 2)
    assert (plan.mode, plan.touched_partitions) == ("replace_partitions", [{"day": "a"}])
    assert [(f.version, f.partition_values) for f in plan.added_files] == [(4, {"day": "d"})]
    assert plan.reason == (
        "commit(s) 3 delete or rewrite rows in 1 partition(s): those are replaced, read whole at version 5; "
        "1 appended file(s) elsewhere are added"
    )
    replaced = convert_partitions(table, plan.touched_partitions, tmp_path / "a", version=plan.to_version)
    assert replaced.version == 5
    assert rows(tmp_path / "a") == [{"id": 2, "day": "a"}, {"id": 7, "day": "a"}]


def test_an_update_that_moves_rows_touches_both_partitions(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    deltalake.DeltaTable(table).update(predicate="id = 5", updates={"day": "'a'"})  # version 3: c -> a
    plan = plan_increment(table, 2)
    assert plan.mode == "replace_partitions"
    assert sorted(str(p["day"]) for p in plan.touched_partitions) == ["a", "c"]
    convert_partitions(table, plan.touched_partitions, tmp_path / "ac", version=3)
    assert [(r["id"], r["day"]) for r in rows(tmp_path / "ac")] == [(0, "a"), (2, "a"), (5, "a")]


def test_deletes_on_an_unpartitioned_table_and_overwrites_rebuild(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    write(flat, pa.table({"id": ids(4)}))
    deltalake.DeltaTable(flat).delete("id = 1")
    plan = plan_increment(flat, 0)
    assert (plan.mode, plan.reason) == ("rebuild", "commit 1 deletes or rewrites rows of an unpartitioned table")
    table = _partitioned(tmp_path / "t")
    write(table, pa.table({"id": ids(1, 9), "day": ["z"]}), mode="overwrite")
    assert plan_increment(table, 2).reason == "commit 3 overwrites the whole table"
    assert plan_increment(table, 2).mode == "rebuild"


def test_optimize_changes_nothing(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    write(table, pa.table({"id": ids(1, 6), "day": ["b"]}), mode="append")  # version 3
    deltalake.DeltaTable(table).optimize.compact()  # version 4: day b's three files become one
    plan = plan_increment(table, 3)
    assert (plan.mode, plan.to_version, plan.reason) == ("none", 4, "version 4 change no rows (compaction only)")
    after = plan_increment(table, 2)
    assert (after.mode, [f.version for f in after.added_files]) == ("append", [3])


def test_an_added_column_rebuilds_and_says_why(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    extra = pa.table({"id": ids(1, 6), "day": ["a"], "score": pa.array([0.5])})
    write(table, extra, mode="append", schema_mode="merge")  # version 3: metaData with the new schema
    plan = plan_increment(table, 2)
    assert plan.mode == "rebuild"
    assert plan.reason == (
        "commit 3 changes the table's metaData (schema, partitioning, properties or features): the shard set is rebuilt"
    )
    # The appended files of earlier versions read in today's schema: the column is null, for the null policy.
    early, now = plan_increment(table, 0, 2).added_files, recorded(table, 3)
    filled = tmp_path / "filled"
    convert_added_files(table, early, filled, version=3, recorded=now, null_policy="fill", fill_values={"score": -1.0})
    assert [(r["id"], r["score"]) for r in rows(filled)] == [(3, -1.0), (4, -1.0), (5, -1.0)]


def test_latest_version_and_missing_commits(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    assert latest_delta_version(table) == 2
    (tmp_path / "t" / "_delta_log" / f"{1:020}.json").unlink()
    with pytest.raises(DeltaTableError, match=r"t has no commit file for version 1 \(removed by log retention"):
        plan_increment(table, 0)
    with pytest.raises(DeltaTableNotFoundError, match="no Delta table at .*nothing: _delta_log/ holds no commit"):
        latest_delta_version(tmp_path / "nothing")


def test_a_vanished_added_file_names_it(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    [file] = plan_increment(table, 1).added_files
    (tmp_path / "t" / file.path).unlink()
    with pytest.raises(DeltaTableError, match=f"reading {file.path} of .* \\(added in version 2\\) failed"):
        convert_added_files(table, [file], tmp_path / "out", version=2, recorded=recorded(table, 1))


def test_added_files_need_a_recorded_schema_without_column_mapping(tmp_path: Path) -> None:
    table = _partitioned(tmp_path / "t")
    [file] = plan_increment(table, 1).added_files
    record = recorded(table, 1)
    with pytest.raises(DeltaTableError, match="record of .*t has no table schema .*convert the table whole once"):
        convert_added_files(table, [file], tmp_path / "a", version=2, recorded=record | {"schema": ""})
    mapped = tmp_path / "mapped"
    write(mapped, pa.table({"id": ids(1)}), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(DeltaTableError, match="mapped maps its column names: convert its changes with"):
        convert_added_files(mapped, [file], tmp_path / "b", version=0, recorded=recorded(mapped, 0))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _id_schema(record: dict) -> tuple[str, str]:
    return record["table_id"], record["schema"]


def test_partition_predicates_quote_values_and_match_nulls() -> None:
    parts: list[dict[str, str | None]] = [{"day": "it's", "n": "3"}, {"day": None}]
    assert partition_predicate(parts) == """("day" = 'it''s' AND "n" = '3') OR ("day" IS NULL)"""
    with pytest.raises(DeltaTableError, match="no partition to read"):
        partition_predicate([])
    assert AddedFile("p", {}, None, 1).rows is None
