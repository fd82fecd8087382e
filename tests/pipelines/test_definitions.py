"""The code location loads with Dagster's own validators, as CI and `dagster dev` load it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DailyPartitionsDefinition, Definitions, FreshnessPolicy

from pipelines import definitions
from pipelines.instance import packaged_settings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(command: list[str], tmp_path: Path, cwd: Path = ROOT, **extra_env: str) -> subprocess.CompletedProcess:
    """``command`` with its own $DAGSTER_HOME (the packaged settings) and data folder, and ``extra_env`` added."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "MDS_DATA_DIR": str(tmp_path / "data"), **extra_env}
    (tmp_path / "dagster.yaml").write_text(packaged_settings())
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_dg_check_defs_loads_the_location_make_ui_serves(tmp_path):
    done = run([str(BIN / "dg"), "check", "defs"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "All definitions loaded successfully" in done.stdout + done.stderr


def test_each_dataset_is_a_component_dg_checks_and_lists_under_its_own_file(tmp_path):
    checked = run([str(BIN / "dg"), "check", "yaml"], tmp_path)
    assert checked.returncode == 0 and "All component YAML validated successfully" in checked.stdout + checked.stderr
    listed = run([str(BIN / "dg"), "list", "defs", "--json"], tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "Warning" not in listed.stderr, listed.stderr[-3000:]
    found = json.loads(listed.stdout)
    # Every asset, check, job, schedule and sensor is listed under its dataset's own defs.yaml.
    sources = {entry["asset_key"]: entry["source"].split(":")[0] for entry in found["assets"]}
    assert sources == {f"{name}/{asset}": f"pipelines/defs/{name}/defs.yaml" for name in DATASETS for asset in ASSETS}
    for section in ("asset_checks", "jobs", "schedules", "sensors"):
        files = {entry["source"].split(":")[0] for entry in found[section]}
        assert files == {f"pipelines/defs/{name}/defs.yaml" for name in DATASETS}, section


def test_a_wrong_dataset_attribute_is_refused_by_dg_check_yaml(tmp_path):
    """The check reads the project's own defs.yaml files; a copy of the project with bad attributes fails it:
    a misspelt attribute, and numbers out of their DatasetSpec bounds. (A text field's rules, a name's pattern
    or a source kind, are checked when the definitions load: dg's schema accepts any text, for templates.)"""
    project = tmp_path / "project"
    project.mkdir()
    for entry in ("pyproject.toml", "setup.py", "mds_core", "README.md"):
        (project / entry).symlink_to(ROOT / entry)
    (project / "pipelines").mkdir()
    for module in (ROOT / "pipelines").iterdir():
        if module.name != "defs":
            (project / "pipelines" / module.name).symlink_to(module)
    (project / "pipelines" / "defs" / "events").mkdir(parents=True)
    (project / "pipelines" / "defs" / "__init__.py").write_text("")
    (project / "pipelines" / "defs" / "events" / "defs.yaml").write_text(
        "type: pipelines.components.Dataset\nattributes:\n  name: events\n  automaton: 'on'\n  keep_versions: 0\n"
        "  source: {kind: table, rows_per_day: 0}\n"
    )
    done = run([str(BIN / "dg"), "check", "yaml"], tmp_path, cwd=project, PYTHONPATH=str(project))
    assert done.returncode != 0
    assert "attributes.automaton Additional properties are not allowed ('automaton' was unexpected)" in done.stdout
    assert "attributes.keep_versions 0 is not valid" in done.stdout
    assert "attributes.source {'kind': 'table', 'rows_per_day': 0} is not valid" in done.stdout


def test_workspace_yaml_names_the_same_location_as_the_dg_project():
    """`dagster ... -w workspace.yaml` and `dg` (pyproject.toml's [tool.dg]) must load one location, which
    `dg check defs` above loads once; loading it a second time through the workspace would prove nothing more."""
    [entry] = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    module = entry["python_module"]
    assert module["module_name"] == project["code_location_target_module"]
    assert module["location_name"] == project["code_location_name"] == "pipelines"
    assert isinstance(getattr(definitions, module["attribute"])(), Definitions)  # loaded when asked, not at import


DATASETS = {"digits": "2026-01-01", "synthetic": "2025-06-01"}  # the registry's datasets and their first days
ASSETS = ("raw_table", "validated_table", "quarantine_table", "shard_set", "published_version")


@pytest.fixture(scope="module")
def defs() -> Definitions:
    return definitions.defs()


def test_definitions_hold_each_datasets_graph_checks_and_automation(defs: Definitions):
    assert {key.to_user_string() for key in defs.resolve_all_asset_keys()} == {
        f"{name}/{asset}" for name in DATASETS for asset in ASSETS
    }
    checks = {(key.asset_key.to_user_string(), key.name) for key in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {
        check
        for name in DATASETS
        for check in (
            (f"{name}/validated_table", "quarantine_counts"),
            (f"{name}/quarantine_table", "quarantine_reasons"),
            (f"{name}/shard_set", "loader_smoke_test"),
            (f"{name}/shard_set", "training_plan"),
        )
    }
    for name, start in DATASETS.items():
        daily = defs.resolve_job_def(f"{name}_daily")
        assert isinstance(daily.partitions_def, DailyPartitionsDefinition)
        assert daily.partitions_def.start.strftime("%Y-%m-%d") == start
        assert daily.asset_layer.selected_asset_keys == {AssetKey([name, asset]) for asset in ASSETS}
        assert defs.resolve_job_def(f"{name}_publish") and defs.resolve_job_def(f"{name}_vacuum")
        assert defs.resolve_schedule_def(f"{name}_daily_schedule").job_name == f"{name}_daily"
        assert defs.resolve_schedule_def(f"{name}_vacuum_schedule").job_name == f"{name}_vacuum"
        assert defs.resolve_sensor_def(f"{name}_landing_sensor").job_name == f"{name}_daily"


def test_every_asset_has_kinds_owners_tags_and_a_code_version(defs: Definitions):
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node, dataset = graph.get(key), key.path[0]
        assert node.kinds, key
        assert node.owners == ["team:ml-data"], key
        assert node.tags["dataset"] == dataset and node.tags["layer"] and node.tags["domain"], key
        assert node.code_version, key
        assert node.group_name == dataset, key
        assert isinstance(node.partitions_def, DailyPartitionsDefinition), key
        assert node.partitions_def.start.strftime("%Y-%m-%d") == DATASETS[dataset]
        # The published version is the one with a freshness policy: published by 06:00 UTC each day.
        freshness = node.freshness_policy
        assert (freshness is not None) == (key.path[-1] == "published_version"), key
        if freshness is not None:
            assert freshness == FreshnessPolicy.cron(
                deadline_cron="0 6 * * *", lower_bound_delta=timedelta(hours=24), timezone="UTC"
            ), key


WATCH_ENVIRONMENT = """
import json, os, sys

read = []


class Watched(type(os.environ)):
    # Records the MDS_ settings the project's code and its component templates look up (other code, such as
    # platform.py, copies the whole environment).

    def __getitem__(self, key):
        caller = sys._getframe(1)
        while caller is not None and caller.f_code.co_filename in ("<frozen os>", "<frozen _collections_abc>"):
            caller = caller.f_back
        looked_up_by = caller.f_code.co_filename if caller is not None else ""
        if key.startswith("MDS_") and ("/pipelines/" in looked_up_by or "/dagster/components/" in looked_up_by):
            read.append(key)
        return super().__getitem__(key)


os.environ.__class__ = Watched
import pipelines.definitions

at_import = sorted(set(read))
pipelines.definitions.defs()
print(json.dumps([at_import, sorted(set(read))]))
"""


def test_importing_the_code_location_reads_no_setting_and_loading_it_does(tmp_path):
    env = {**os.environ, "MDS_DATA_DIR": str(tmp_path), "MDS_SHARD_STORE": str(tmp_path / "sets")}
    done = subprocess.run([sys.executable, "-c", WATCH_ENVIRONMENT], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    at_import, after_load = json.loads(done.stdout.splitlines()[-1])
    assert at_import == []
    assert {"MDS_SHARD_STORE", "MDS_DATASETS", "MDS_AUTOMATION"} <= set(after_load)  # the watch works
