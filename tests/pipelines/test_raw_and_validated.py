"""Raw and validated assets through dagster.materialize(): sources, quarantine and the counts check."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, materialize

from pipelines.assets.raw import build_raw_table
from pipelines.assets.validated import COUNTS_CHECK, REASONS_CHECK, build_validated_table, reasons_check
from pipelines.conventions import op_name
from pipelines.registry import DatasetSpec
from tests.pipelines.conftest import digits

DAY = "2026-01-03"


def raw_and_validated(spec: DatasetSpec) -> list:
    return [build_raw_table(spec), build_validated_table(spec)]


def check_result(result, name: str):
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def meta(evaluation) -> dict:
    return {key: value.value for key, value in evaluation.metadata.items()}


def test_digits_day_is_validated_without_quarantine(resources, spec, spark_session):
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources)
    assert result.success
    counts = meta(check_result(result, COUNTS_CHECK))
    assert counts["in"] == counts["valid"] == 60 and counts["quarantined"] == 0
    valid = resources["catalog"].read_days(spark_session, "digits_validated", [DAY])
    rows = valid.orderBy("id").collect()
    # Day 2 of the embedded dataset: ids continue where day 1 stopped, labels and pixels are real digits.
    assert [r["id"] for r in rows] == list(range(120, 180))
    assert {len(r["pixels"]) for r in rows} == {64} and max(max(r["pixels"]) for r in rows) == 16
    assert {r["label"] for r in rows} <= set(range(10)) and len({r["label"] for r in rows}) == 10


def test_synthetic_source_makes_any_number_of_rows(resources, spark_session):
    spec = digits(kind="synthetic", rows_per_day=5000)
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources)
    assert result.success
    assert meta(check_result(result, COUNTS_CHECK))["valid"] == 5000


def write_landing_parquet(spark_session, folder: Path, day: str, bad_label: int | None = None) -> None:
    """Five digit-shaped rows as a Parquet file, optionally one with an impossible label and short pixels."""
    from pyspark.sql import types as T

    rows = [(i, i % 10, [i % 17] * 64) for i in range(5)]
    if bad_label is not None:
        rows.append((99, bad_label, [1, 2, 3]))
    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("label", T.IntegerType()),
            T.StructField("pixels", T.ArrayType(T.ByteType())),
        ]
    )
    spark_session.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(folder / day))


def test_schema_violating_row_is_quarantined_and_the_check_fails(resources, spark_session, tmp_path):
    write_landing_parquet(spark_session, tmp_path / "landing", DAY, bad_label=42)
    spec = digits(kind="path", path=str(tmp_path / "landing" / DAY), format="parquet")
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, raise_on_error=False)
    evaluation = check_result(result, COUNTS_CHECK)
    counts = meta(evaluation)
    assert not evaluation.passed
    assert (counts["in"], counts["valid"], counts["quarantined"]) == (6, 5, 1)
    assert counts["balanced"] is True and counts["quarantined_fraction"] == pytest.approx(1 / 6)
    quarantine = resources["catalog"].read_days(spark_session, "digits_quarantine", [DAY]).collect()
    assert [row["id"] for row in quarantine] == [99]
    assert "label: fails in_range" in quarantine[0]["reason"] and "pixels: not 64 values" in quarantine[0]["reason"]
    assert "label" in counts["top_reasons"].__str__()


def test_threshold_is_configurable_and_a_rerun_replaces_the_day(resources, spark_session, tmp_path):
    write_landing_parquet(spark_session, tmp_path / "landing", DAY, bad_label=-1)
    spec = digits(kind="path", path=str(tmp_path / "landing" / DAY))
    run_config = {"ops": {op_name(spec, "validated_table"): {"config": {"max_quarantined_fraction": 0.5}}}}
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, run_config=run_config)
    assert result.success and check_result(result, COUNTS_CHECK).passed

    # The day again from a clean source: its old rows, valid and quarantined, are gone.
    result = materialize(raw_and_validated(digits()), partition_key=DAY, resources=resources)
    counts = meta(check_result(result, COUNTS_CHECK))
    assert (counts["in"], counts["valid"], counts["quarantined"]) == (60, 60, 0)
    assert not (Path(resources["catalog"].location("digits_quarantine")) / f"day={DAY}").exists()


def test_wrong_column_type_is_a_clear_error(resources, spark_session, tmp_path):
    spark_session.createDataFrame(
        [(1, "seven", [0] * 64)], "id long, label string, pixels array<tinyint>"
    ).write.parquet(str(tmp_path / "src"))
    spec = digits(kind="path", path=str(tmp_path / "src"))
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error is not None and error.cause is not None  # the ValueError, under Dagster's own error
    assert error.cause.cls_name == "ValueError"
    assert "column 'label' is string, expected int; cast it in the source" in error.cause.message


def test_the_quarantine_table_is_an_asset_with_its_own_check(resources, spark_session, tmp_path):
    folder = tmp_path / "landing"
    write_landing_parquet(spark_session, folder, DAY, bad_label=42)
    spec = digits(kind="path", path=str(folder / DAY))
    lenient = {"ops": {op_name(spec, "validated_table"): {"config": {"max_quarantined_fraction": 1.0}}}}
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, run_config=lenient)
    assert result.success
    [quarantine] = [
        m for m in result.get_asset_materialization_events() if m.asset_key == AssetKey(["digits", "quarantine_table"])
    ]
    metadata = {k: v.value for k, v in quarantine.materialization.metadata.items()}
    uri = metadata["dagster/uri"]
    assert metadata["dagster/row_count"] == 1 and isinstance(uri, str) and uri.endswith("digits_quarantine")
    reasons = check_result(result, REASONS_CHECK)
    assert reasons.passed and reasons.asset_key.to_user_string() == "digits/quarantine_table"
    assert meta(reasons)["quarantined"] == 1 and meta(reasons)["unexplained"] == 0
    [row] = resources["catalog"].read_days(spark_session, "digits_quarantine", [DAY]).collect()
    assert row["id"] == 99 and "label" in row["reason"]


def test_quarantined_rows_without_a_reason_fail_the_quarantine_check():
    failed = reasons_check(digits(), quarantined=5, unexplained=2, reasons={"": 2, "label: in_range": 3})
    assert not failed.passed and failed.description == "2 of 5 quarantined rows name no reason"
