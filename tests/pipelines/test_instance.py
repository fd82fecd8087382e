"""The instance settings: one file shipped in the package, the checkout's top-level dagster.yaml, and the move
of a checkout's instance from the layout before (DAGSTER_HOME=.dagster_home, its own copy of the settings)."""

from __future__ import annotations

from pathlib import Path

import yaml
from dagster import AssetKey, DagsterInstance, asset, materialize

from pipelines.instance import LEGACY_HOME, notes, packaged_settings, prepare_home

ROOT = Path(__file__).resolve().parents[2]
# pipelines/dagster.yaml's settings plus where a checkout keeps the state: the only keys the two files differ in.
STATE_KEYS = {"storage", "local_artifact_storage", "compute_logs"}
# deploy/dagster.yaml as `make ui` and `make demo` copied it into .dagster_home until 2026-12.
BEFORE = ROOT / "tests" / "fixtures" / "instance" / "dagster_home_2026-11.yaml"


def test_the_checkout_settings_are_the_packaged_ones_plus_where_the_state_goes() -> None:
    checkout, packaged = yaml.safe_load((ROOT / "dagster.yaml").read_text()), yaml.safe_load(packaged_settings())
    assert {k: v for k, v in checkout.items() if k not in STATE_KEYS} == packaged
    assert not STATE_KEYS & packaged.keys()  # a deployment's state stays under its own $DAGSTER_HOME
    state = [checkout["storage"]["sqlite"]["base_dir"], checkout["local_artifact_storage"]["config"]["base_dir"]]
    assert state == [LEGACY_HOME, LEGACY_HOME]
    assert checkout["compute_logs"]["config"]["base_dir"] == f"{LEGACY_HOME}/storage"


@asset
def numbers() -> list[int]:
    return [1, 2, 3]


def test_a_checkout_instance_from_before_keeps_its_runs_and_history(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "project"
    old_home = project / LEGACY_HOME
    old_home.mkdir(parents=True)
    (old_home / "dagster.yaml").write_text(BEFORE.read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(old_home))
    with DagsterInstance.get() as before:
        first = materialize([numbers], instance=before)
    assert first.success
    old_files = sorted(str(p.relative_to(old_home)) for p in old_home.rglob("*"))

    # The move: nothing but the new top-level settings; Dagster now starts in the project root.
    (project / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    monkeypatch.chdir(project)
    monkeypatch.setenv("DAGSTER_HOME", str(project))
    with DagsterInstance.get() as after:
        assert [run.run_id for run in after.get_runs()] == [first.run_id]
        event = after.get_latest_materialization_event(AssetKey("numbers"))
        assert event is not None and event.run_id == first.run_id
        second = materialize([numbers], instance=after)
        assert second.success and {r.run_id for r in after.get_runs()} == {first.run_id, second.run_id}
    assert sorted(p.name for p in project.iterdir()) == [LEGACY_HOME, "dagster.yaml"]
    assert set(old_files) <= {str(p.relative_to(old_home)) for p in old_home.rglob("*")}  # the same databases
    [note] = notes(project)
    assert f"{old_home / 'dagster.yaml'} is no longer read" in note and "merge any change you made" in note


def test_a_deployment_home_gets_the_packaged_settings_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert notes(home) == [] and (home / "dagster.yaml").read_text() == packaged_settings()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # the deployment's own choice
    [note] = notes(home)
    assert "lacks `concurrency: pools: default_limit: 1`" in note
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    assert prepare_home(home) == ["concurrency: pools: default_limit: 1"]
