"""A shard-set version records the Delta table versions it covers, and the next incremental run starts there."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta import delta_to_mds
from mds_core.convert.delta_changes import plan_increment
from mds_core.convert.delta_increment import convert_added_files, delta_lineage
from mds_core.versions import ShardSet
from mds_core.versions.source_lineage import recorded_table_version, source_lineage
from tests.delta.tables import ids

deltalake = pytest.importorskip("deltalake")


def _number(tx) -> int:
    """The number of the version ``tx`` committed."""
    return tx.version.version


def test_lineage_is_recorded_read_back_and_starts_the_next_plan(tmp_path: Path) -> None:
    table = tmp_path / "t"
    deltalake.write_deltalake(table, pa.table({"id": ids(3)}))
    shard_set = ShardSet(str(tmp_path / "set"))
    assert recorded_table_version(shard_set) is None
    with shard_set.transaction("overwrite") as tx:
        first = delta_to_mds(table, tx.out)
        tx.lineage.update(delta_lineage(first, uc_name="main.raw.events"))
    expected: dict = {"kind": "delta", "table_uri": table.as_uri(), "uc_name": "main.raw.events"}
    expected |= {"table_id": first.table_id, "versions": [0, 0], "schema": first.schema}
    assert [field["name"] for field in json.loads(first.schema)["fields"]] == ["id"]
    assert source_lineage(shard_set.version(_number(tx))) == expected
    assert recorded_table_version(shard_set) == 0

    deltalake.write_deltalake(table, pa.table({"id": ids(2, 3)}), mode="append")
    deltalake.write_deltalake(table, pa.table({"id": ids(1, 5)}), mode="append")
    plan = plan_increment(table, recorded_table_version(shard_set) or 0)
    assert (plan.from_version, plan.to_version, plan.mode) == (0, 2, "append")
    record = source_lineage(shard_set.version(_number(tx))) or {}
    with shard_set.transaction("append") as tx:
        added = convert_added_files(table, plan.added_files, tx.out, version=plan.to_version, recorded=record)
        tx.lineage.update(delta_lineage(added, first_version=plan.from_version + 1))
    assert (source_lineage(shard_set.version(_number(tx))) or {}).get("versions") == [1, 2]
    assert recorded_table_version(shard_set) == 2
    assert shard_set.version(_number(tx)).rows == 6


def test_versions_from_elsewhere_have_no_delta_lineage(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    with shard_set.transaction("overwrite", lineage={"source": {"kind": "landing", "days": ["d"]}}) as tx:
        delta_free = tmp_path / "t"
        deltalake.write_deltalake(delta_free, pa.table({"id": ids(1)}))
        delta_to_mds(delta_free, tx.out)
    assert source_lineage(shard_set.version(_number(tx))) is None
    assert recorded_table_version(shard_set) is None
