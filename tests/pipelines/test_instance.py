"""The instance settings: one file shipped in the package, and the checkout's top-level dagster.yaml."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipelines.instance import notes, packaged_settings, prepare_home

ROOT = Path(__file__).resolve().parents[2]
# pipelines/dagster.yaml's settings plus where a checkout keeps the state: the only keys the two files differ in.
STATE_KEYS = {"storage", "local_artifact_storage", "compute_logs"}
STATE = ".dagster_home"  # the checkout's instance state, in one folder .gitignore leaves out


def test_the_checkout_settings_are_the_packaged_ones_plus_where_the_state_goes() -> None:
    checkout, packaged = yaml.safe_load((ROOT / "dagster.yaml").read_text()), yaml.safe_load(packaged_settings())
    assert {k: v for k, v in checkout.items() if k not in STATE_KEYS} == packaged
    assert not STATE_KEYS & packaged.keys()  # a deployment's state stays under its own $DAGSTER_HOME
    state = [checkout["storage"]["sqlite"]["base_dir"], checkout["local_artifact_storage"]["config"]["base_dir"]]
    assert state == [STATE, STATE]
    assert checkout["compute_logs"]["config"]["base_dir"] == f"{STATE}/storage"


def test_a_deployment_home_gets_the_packaged_settings_once_and_they_are_never_overwritten(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert notes(home) == [] and (home / "dagster.yaml").read_text() == packaged_settings()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # the deployment's own choice
    [note] = notes(home)
    assert "lacks `concurrency: pools: default_limit: 1`" in note
    assert prepare_home(home) == ["concurrency: pools: default_limit: 1"]
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    (home / "dagster.yaml").write_text(packaged_settings() + "\n# mine\n")
    assert prepare_home(home) == [] and (home / "dagster.yaml").read_text().endswith("# mine\n")
