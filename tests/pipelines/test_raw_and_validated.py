"""Raw and validated assets through dagster.materialize(): sources, quarantine and the counts check."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, materialize

from pipelines.assets.raw import build_raw_table
from pipelines.assets.validated import COUNTS_CHECK, REASONS_CHECK, build_validated_table
from pipelines.conventions import op_name
from pipelines.registry import DatasetSpec
from tests.pipelines.conftest import check, digits, meta, only_failure, write_landing_parquet, write_rows

DAY = "2026-01-03"


def raw_and_validated(spec: DatasetSpec) -> list:
    return [build_raw_table(spec), build_validated_table(spec)]


def test_digits_day_is_validated_without_quarantine(resources, spec, spark_session):
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources)
    assert result.success
    counts = meta(check(result, COUNTS_CHECK))
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
    assert meta(check(result, COUNTS_CHECK))["valid"] == 5000


def test_schema_violating_row_is_quarantined_in_its_own_checked_asset_and_the_counts_check_fails(
    resources, spark_session, tmp_path
):
    write_landing_parquet(spark_session, tmp_path / "landing", DAY, bad_label=42)
    spec = digits(kind="path", path=str(tmp_path / "landing" / DAY), format="parquet")
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, raise_on_error=False)
    evaluation = check(result, COUNTS_CHECK)
    counts = meta(evaluation)
    assert not evaluation.passed
    assert (counts["in"], counts["valid"], counts["quarantined"]) == (6, 5, 1)
    assert counts["balanced"] is True and counts["quarantined_fraction"] == pytest.approx(1 / 6)
    quarantine = resources["catalog"].read_days(spark_session, "digits_quarantine", [DAY]).collect()
    assert [row["id"] for row in quarantine] == [99]
    assert "label: fails in_range" in quarantine[0]["reason"] and "pixels: not 64 values" in quarantine[0]["reason"]
    assert "label" in counts["top_reasons"].__str__()
    # The quarantine table is an asset of the same step, with its own check: every row there names a reason.
    [quarantined] = [
        m for m in result.get_asset_materialization_events() if m.asset_key == AssetKey(["digits", "quarantine_table"])
    ]
    metadata = meta(quarantined.materialization)
    uri = metadata["dagster/uri"]
    assert metadata["dagster/row_count"] == 1 and isinstance(uri, str) and uri.endswith("digits_quarantine")
    reasons = check(result, REASONS_CHECK)
    assert reasons.passed and reasons.asset_key.to_user_string() == "digits/quarantine_table"
    assert meta(reasons)["quarantined"] == 1 and meta(reasons)["unexplained"] == 0


def test_threshold_is_configurable_and_a_rerun_replaces_the_day(resources, spark_session, tmp_path):
    write_landing_parquet(spark_session, tmp_path / "landing", DAY, bad_label=-1)
    spec = digits(kind="path", path=str(tmp_path / "landing" / DAY))
    run_config = {"ops": {op_name(spec, "validated_table"): {"config": {"max_quarantined_fraction": 0.5}}}}
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, run_config=run_config)
    assert result.success and check(result, COUNTS_CHECK).passed

    # The day again from a clean source: its old rows, valid and quarantined, are gone.
    result = materialize(raw_and_validated(digits()), partition_key=DAY, resources=resources)
    counts = meta(check(result, COUNTS_CHECK))
    assert (counts["in"], counts["valid"], counts["quarantined"]) == (60, 60, 0)
    assert not (Path(resources["catalog"].location("digits_quarantine")) / f"day={DAY}").exists()


def test_wrong_column_type_is_a_clear_error(resources, spark_session, tmp_path):
    write_rows(
        spark_session, tmp_path / "src", [(1, "seven", [0] * 64)], "id long, label string, pixels array<tinyint>"
    )
    spec = digits(kind="path", path=str(tmp_path / "src"))
    result = materialize(raw_and_validated(spec), partition_key=DAY, resources=resources, raise_on_error=False)
    assert not result.success
    error = only_failure(result)[1]
    assert error.cause is not None  # the ValueError, under Dagster's own error
    assert error.cause.cls_name == "ValueError"
    assert "column 'label' is string, expected int; cast it in the source" in error.cause.message
