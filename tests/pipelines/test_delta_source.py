"""A Delta table as a dataset's source: raw_table through materialize(), lineage into the shard set, the sensor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import SensorResult, build_sensor_context, materialize

from mds_core.versions.source_lineage import recorded_table_version, source_lineage
from pipelines.assets.raw import build_raw_table
from pipelines.conventions import op_name
from pipelines.delta_sensor import delta_sensor
from pipelines.factory import dataset_definitions
from pipelines.registry import DatasetSpec, Source
from pipelines.runs import materialize_days
from tests.pipelines.conftest import materialization, meta, only_failure
from tests.pipelines.test_automation import run_requests

deltalake = pytest.importorskip("deltalake")
write = deltalake.write_deltalake

DAY1, DAY2, DAY3 = "2026-01-01", "2026-01-02", "2026-01-03"


def digit_rows(first: int, days: list[str]) -> pa.Table:
    """Digit-shaped rows with ids from ``first``, one per entry of ``days``."""
    n = len(days)
    return pa.table(
        {
            "id": pa.array(range(first, first + n), pa.int64()),
            "label": pa.array([i % 10 for i in range(first, first + n)], pa.int32()),
            "pixels": pa.array([[i % 17] * 64 for i in range(first, first + n)], pa.list_(pa.int8())),
            "day": days,
        }
    )


def digits_table(path: Path) -> str:
    """Version 0: ids 0..2 on day 1, 3..4 on day 2; version 1 appends id 5 on day 1; version 2 deletes id 0."""
    write(path, digit_rows(0, [DAY1, DAY1, DAY1, DAY2, DAY2]), partition_by=["day"])
    write(path, digit_rows(5, [DAY1]), mode="append")
    deltalake.DeltaTable(path).delete("id = 0")
    return str(path)


def delta_spec(table: str, **source: Any) -> DatasetSpec:
    return DatasetSpec(name="digits", source=Source(kind="delta", path=table, day_column="day", **source))


def tick(spec: DatasetSpec, resources: dict, cursor: str | None = None) -> SensorResult:
    """One evaluation of ``spec``'s Delta sensor."""
    result = delta_sensor(spec)(build_sensor_context(cursor=cursor, resources=resources))
    assert isinstance(result, SensorResult)  # the sensor always answers with one SensorResult
    return result


def recorded_source(shards: Any) -> dict[str, Any]:
    """The source lineage of the shard set's newest version (it must have one)."""
    source = source_lineage(shards.latest())
    assert source is not None
    return source


def raw_ids(resources: dict, spark_session, days: list[str]) -> dict[str, list[int]]:
    frame = resources["catalog"].read_days(spark_session, "digits_raw", days)
    found: dict[str, list[int]] = {}
    for row in frame.orderBy("id").collect():
        found.setdefault(row["day"], []).append(row["id"])
    return found


def test_raw_reads_a_day_at_the_pinned_version_and_at_the_latest(resources, spark_session, tmp_path):
    table = digits_table(tmp_path / "table")
    table_id = deltalake.DeltaTable(table).metadata().id
    pinned = {"ops": {op_name(delta_spec(table), "raw_table"): {"config": {"version": 1}}}}
    result = materialize(
        [build_raw_table(delta_spec(table))], partition_key=DAY1, resources=resources, run_config=pinned
    )
    assert raw_ids(resources, spark_session, [DAY1]) == {DAY1: [0, 1, 2, 5]}
    event = materialization(result, "raw_table")
    assert {k: meta(event)[k] for k in ("table_uri", "table_id", "table_version", "rows")} == {
        "table_uri": f"file://{table}",
        "table_id": table_id,
        "table_version": 1,
        "rows": 4,
    }
    assert meta(event)["source"] == f"Delta table {table} at version 1"
    assert event.tags["dagster/data_version"] == f"{table_id}@1"

    latest = materialize([build_raw_table(delta_spec(table))], partition_key=DAY1, resources=resources)
    assert raw_ids(resources, spark_session, [DAY1]) == {DAY1: [1, 2, 5]}
    event = materialization(latest, "raw_table")
    assert (meta(event)["table_version"], event.tags["dagster/data_version"]) == (2, f"{table_id}@2")


def test_every_day_of_a_range_reads_one_version(resources, spark_session, tmp_path):
    table = digits_table(tmp_path / "table")
    spec = delta_spec(table, version=0)  # the registry pins version 0, which the overrides keep
    result = materialize(
        [build_raw_table(spec)],
        resources=resources,
        tags={"dagster/asset_partition_range_start": DAY1, "dagster/asset_partition_range_end": DAY3},
    )
    assert result.success
    assert raw_ids(resources, spark_session, [DAY1, DAY2, DAY3]) == {DAY1: [0, 1, 2], DAY2: [3, 4]}
    event = materialization(result, "raw_table")
    assert meta(event)["rows_per_day"] == {DAY1: 3, DAY2: 2}


def test_a_missing_table_or_version_is_a_clear_failure(resources, tmp_path):
    table = digits_table(tmp_path / "table")
    result = materialize(
        [build_raw_table(delta_spec(table, version=7))], partition_key=DAY1, resources=resources, raise_on_error=False
    )
    step, error = only_failure(result)
    assert step == "digits__raw_table"
    assert f"{table} has no version 7: its latest is 2" in error.message
    missing = materialize(
        [build_raw_table(delta_spec(str(tmp_path / "nowhere")))],
        partition_key=DAY1,
        resources=resources,
        raise_on_error=False,
    )
    assert f"no Delta table at {tmp_path / 'nowhere'}" in only_failure(missing)[1].message
    wrong_column = delta_spec(table).model_copy(update={"source": Source(kind="delta", path=table, day_column="when")})
    bad = materialize([build_raw_table(wrong_column)], partition_key=DAY1, resources=resources, raise_on_error=False)
    assert "day_column 'when' is not a column of" in only_failure(bad)[1].message


def test_the_shard_set_version_records_the_table_version_it_read(resources, tmp_path):
    table = digits_table(tmp_path / "table")
    table_id = deltalake.DeltaTable(table).metadata().id
    spec = delta_spec(table)
    first = materialize_days(spec, [DAY1, DAY2], resources, mode="overwrite")
    shards = resources["shard_store"].shard_set("digits")
    expected = {"kind": "delta", "table_uri": f"file://{table}", "table_id": table_id, "versions": [2, 2]}
    source = recorded_source(shards)
    assert {k: source[k] for k in expected} == expected
    assert "change" not in source  # a backfill, not a sensor's run: no plan to record
    assert (source["path"], source["day_column"]) == (table, "day")
    assert recorded_table_version(shards) == 2
    shard_meta = meta(materialization(first, "shard_set"))
    assert {k: shard_meta[k] for k in ("version", "table_id", "table_version", "table_versions")} == {
        "version": 1,
        "table_id": table_id,
        "table_version": 2,
        "table_versions": [2, 2],
    }
    published = meta(materialization(first, "published_version"))
    assert (published["published"], published["table"], published["table_versions"]) == (1, f"file://{table}", "2..2")
    assert 'option("versionAsOf", 2).load(' in published["read_it"]


@pytest.mark.slow  # two runs of the whole graph (about 70 s): the fast tier has the first one above
def test_a_sensor_run_extends_the_recorded_table_versions(resources, tmp_path):
    table = digits_table(tmp_path / "table")
    spec = delta_spec(table)
    assert materialize_days(spec, [DAY1, DAY2], resources, mode="overwrite").success
    shards = resources["shard_store"].shard_set("digits")
    write(table, digit_rows(6, [DAY3]), mode="append")  # version 3
    [request] = run_requests(tick(spec, resources))
    assert (request.partition_key, request.tags["mds/delta_mode"]) == (DAY3, "append")
    second = materialize_days(spec, [DAY3], resources, run_config=dict(request.run_config), tags=request.tags)
    assert recorded_source(shards)["versions"] == [2, 3]
    change = {"mode": "append", "versions": "3..3", "reason": "version 3 only append: 1 file(s) added"}
    assert recorded_source(shards)["change"] == change
    shard_meta = meta(materialization(second, "shard_set"))
    assert (shard_meta["table_version"], shard_meta["table_change"]) == (3, f"append: {change['reason']}")
    assert recorded_table_version(shards) == 3


def test_the_sensor_requests_the_days_each_new_version_changed(resources, tmp_path):
    table = digits_table(tmp_path / "table")
    spec = delta_spec(table)
    never_converted = tick(spec, resources)
    assert (never_converted.run_requests, never_converted.cursor) == ([], None)
    assert never_converted.skip_reason is not None
    assert never_converted.skip_reason.skip_message == (
        f"digits's shard set records no version of {table}: convert its days once (a backfill), "
        "then the sensor follows the table"
    )
    up_to_date = tick(spec, resources, "2")
    assert up_to_date.skip_reason is not None
    assert (up_to_date.skip_reason.skip_message, up_to_date.cursor) == ("no table version after 2", "2")

    write(table, digit_rows(6, [DAY3, DAY3]), mode="append")  # version 3
    appended = tick(spec, resources, "2")
    assert appended.cursor == "3"
    [request] = run_requests(appended)
    assert (request.partition_key, request.run_key) == (DAY3, f"{DAY3}:v3")
    assert request.run_config == {"ops": {"digits__raw_table": {"config": {"version": 3}}}}
    assert request.tags == {
        "dataset": "digits",
        "mds/delta_mode": "append",
        "mds/delta_versions": "3..3",
        "mds/delta_reason": "version 3 only append: 1 file(s) added",
    }

    deltalake.DeltaTable(table).delete("id = 3")  # version 4, day 2
    deleted = tick(spec, resources, "3")
    assert [(r.partition_key, r.tags["mds/delta_mode"]) for r in run_requests(deleted)] == [
        (DAY2, "replace_partitions")
    ]
    assert deleted.cursor == "4"
    both = tick(spec, resources, "2")  # an append and a delete in one tick
    assert [r.partition_key for r in run_requests(both)] == [DAY2, DAY3]

    deltalake.DeltaTable(table).optimize.compact()  # version 5: day 1's two files into one, no data change
    optimized = tick(spec, resources, "4")
    assert (optimized.run_requests, optimized.cursor) == ([], "5")
    assert optimized.skip_reason is not None
    assert str(optimized.skip_reason.skip_message).endswith(": no day to convert")


def test_the_sensor_places_changes_on_a_table_not_partitioned_by_day(resources, tmp_path):
    feed = {"delta.enableChangeDataFeed": "true"}
    for name, configuration in (("fed", feed), ("plain", None)):
        write(tmp_path / name, digit_rows(0, [DAY1, DAY1, DAY2]), configuration=configuration)
        write(tmp_path / name, digit_rows(3, [DAY3]), mode="append")  # version 1: its file's statistics say day 3
        deltalake.DeltaTable(tmp_path / name).delete("id = 2")  # version 2: the feed's rows say day 2
    placed = tick(delta_spec(str(tmp_path / "fed")), resources, "0")
    assert [(r.partition_key, r.tags["mds/delta_mode"]) for r in run_requests(placed)] == [
        (DAY2, "replace_partitions"),
        (DAY3, "replace_partitions"),
    ]
    # Without the feed nothing says which day the delete touched: every published day (here none) is converted.
    unplaced = tick(delta_spec(str(tmp_path / "plain")), resources, "0")
    assert unplaced.skip_reason is not None
    assert unplaced.skip_reason.skip_message == (
        "commit 2 deletes or rewrites rows of an unpartitioned table: no day to convert"
    )


def test_a_delta_dataset_gets_the_delta_sensor_instead_of_the_landing_sensor(tmp_path):
    table = digits_table(tmp_path / "table")
    delta = dataset_definitions(delta_spec(table))
    assert [s.name for s in delta.sensors] == ["digits_delta_sensor"]
    assert [s.name for s in dataset_definitions(delta_spec(table).model_copy(update={"source": Source()})).sensors] == [
        "digits_landing_sensor"
    ]
    assert delta.sensors[0].default_status.value == "STOPPED"
