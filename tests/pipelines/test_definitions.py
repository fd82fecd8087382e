"""The code location loads with Dagster's own validators, as CI and `dagster dev` load it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "MDS_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_dg_check_defs(tmp_path):
    done = run([str(BIN / "dg"), "check", "defs"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "All definitions loaded successfully" in done.stdout + done.stderr


def test_workspace_yaml_validates(tmp_path):
    done = run([str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_definitions_hold_the_graph_checks_and_automation():
    from pipelines.definitions import defs

    assert {key.to_user_string() for key in defs.resolve_all_asset_keys()} == {
        "raw_table", "validated_table", "shard_set", "published_version"}
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {"quarantine_counts", "loader_smoke_test", "training_plan"}
    assert defs.resolve_job_def("daily_conversion").partitions_def is not None
    assert defs.resolve_schedule_def("daily_conversion_schedule")
    assert defs.resolve_sensor_def("landing_sensor")


def test_an_existing_dagster_yaml_is_never_overwritten(tmp_path: Path) -> None:
    from pipelines.instance import prepare_home

    fresh = tmp_path / "fresh"
    assert prepare_home(fresh) == [] and (fresh / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")  # a user's own instance settings
    assert prepare_home(mine) == ["concurrency: pools: default_limit: 1"]
    assert (mine / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    (mine / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text() + "\n# mine\n")
    assert prepare_home(mine) == [] and (mine / "dagster.yaml").read_text().endswith("# mine\n")
