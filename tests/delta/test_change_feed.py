"""Deletes and updates on a table not partitioned by the shard set's day column: the Change Data Feed places them.

Real tables written by deltalake with ``delta.enableChangeDataFeed``, whose deletes and updates write
``_change_data/`` files; the plan reads the day column of those rows and replaces just those days.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta_changes import plan_increment
from mds_core.convert.delta_increment import convert_partitions
from mds_core.errors import DeltaTableError
from tests.delta.tables import ids, rows

deltalake = pytest.importorskip("deltalake")
write = deltalake.write_deltalake
FEED = {"delta.enableChangeDataFeed": "true"}


def _unpartitioned(path: Path, feed: bool = True) -> str:
    """Version 0: ids 0..3 on days a, b, a, c in one file; version 1 appends id 4 on day d; 2 deletes id 0 (day a);
    3 sets id 3 (day c) to 10."""
    write(path, pa.table({"id": ids(4), "day": ["a", "b", "a", "c"]}), configuration=FEED if feed else None)
    write(path, pa.table({"id": ids(1, 4), "day": ["d"]}), mode="append")
    deltalake.DeltaTable(path).delete("id = 0")
    deltalake.DeltaTable(path).update(updates={"id": "10"}, predicate="id = 3")
    return str(path)


def test_the_feed_names_the_days_a_delete_and_an_update_touched(tmp_path: Path) -> None:
    table = _unpartitioned(tmp_path / "t")
    plan = plan_increment(table, 0, by="day")
    assert (plan.mode, plan.touched_partitions) == ("replace_partitions", [{"day": "a"}, {"day": "c"}])
    assert [(f.version, f.by_value, f.partition_values) for f in plan.added_files] == [(1, "d", {})]
    assert plan.reason.startswith("commit(s) 2, 3 delete or rewrite rows in 2 partition(s)")
    convert_partitions(table, plan.touched_partitions, tmp_path / "ac", version=plan.to_version)
    # Day a without the deleted id 0, day c with the updated id; day b's rows, copied by the rewrite, not read.
    assert rows(tmp_path / "ac") == [{"id": 2, "day": "a"}, {"id": 10, "day": "c"}]


def test_without_the_feed_or_a_day_column_a_delete_rebuilds(tmp_path: Path) -> None:
    rebuild = "commit 2 deletes or rewrites rows of an unpartitioned table"
    for table, by in ((_unpartitioned(tmp_path / "plain", feed=False), "day"), (_unpartitioned(tmp_path / "t"), None)):
        plan = plan_increment(table, 0, by=by)
        assert (plan.mode, plan.reason) == ("rebuild", rebuild), table
    appended = plan_increment(tmp_path / "t", 0, 1, by="day")  # before the delete: appends, each file's day known
    assert (appended.mode, [f.by_value for f in appended.added_files]) == ("append", ["d"])


def test_an_appended_file_of_several_days_beside_a_replaced_day_rebuilds(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write(table, pa.table({"id": ids(2), "day": ["a", "b"]}), configuration=FEED)
    write(table, pa.table({"id": ids(2, 2), "day": ["a", "e"]}), mode="append")  # one file, days a and e
    deltalake.DeltaTable(table).delete("id = 1")  # day b
    plan = plan_increment(table, 0, by="day")
    assert plan.mode == "rebuild"
    assert plan.reason == (
        "an appended file holds several values of 'day' (its statistics say), where rows are replaced: "
        "the shard set is rebuilt"
    )


def test_a_missing_feed_file_names_it(tmp_path: Path) -> None:
    table = _unpartitioned(tmp_path / "t")
    for path in (tmp_path / "t" / "_change_data").iterdir():
        path.unlink()
    with pytest.raises(
        DeltaTableError, match=r"reading the Change Data Feed file _change_data/.* \(version 2\) failed"
    ):
        plan_increment(table, 0, by="day")
