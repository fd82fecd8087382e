"""Every code block of README.md and docs/*.md runs, is checked, or says why it cannot be.

How a block is annotated, and what each annotation means: ``tests/docs/blocks.py``. Per page, the
``python`` and shell blocks run in order in one process (``tests/docs/run_page.py``), in a scratch
workspace laid out like the project's root (``.venv/bin/python``, ``examples/``, ``mds`` on the PATH),
after the page's explicit setup (``tests/docs/pages.py``). ``yaml``, ``json`` and ``toml`` blocks are
parsed, and checked against the code they describe where that is cheap.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.docs.blocks import ROOT, Block, all_blocks, blocks, pages
from tests.docs.pages import PAGES, Page

RUNS_ON_THE_PAGE = ("python", "shell", "output of")


def test_every_block_is_run_checked_or_says_why() -> None:
    problems = []
    for block in all_blocks():
        kind = block.kind
        if kind == "unannotated":
            problems.append(
                f"{block.where}: a {block.lang or 'unlabelled'} block needs <!-- not run: reason -->, "
                "<!-- run by tests/... -->, <!-- output of: command --> or a check"
            )
        elif kind == "unknown annotation":
            problems.append(f"{block.where}: unknown annotation <!-- {block.note} -->")
        elif kind in ("not run", "run by", "output of", "signature of") and not block.argument and block.note:
            problems.append(f"{block.where}: <!-- {block.note} --> says nothing after '{kind}'")
    assert not problems, "\n".join(problems)


def test_the_tests_that_run_blocks_exist() -> None:
    """A ``run by`` names a test file (and test) that exists; so does every test a reason mentions."""
    problems = []
    for block in all_blocks():
        if block.kind == "run by" and not block.argument.startswith("tests/"):
            problems.append(f"{block.where}: 'run by' names no test: {block.argument}")
        for target in re.findall(r"\btests/[\w/.]+\.py(?:::\w+)?", block.note):
            path, _, name = target.partition("::")
            file = ROOT / path
            if not file.is_file():
                problems.append(f"{block.where}: no test file {path}")
            elif name and not re.search(rf"^\s*def {re.escape(name)}\(", file.read_text(), re.MULTILINE):
                problems.append(f"{block.where}: {path} has no test {name}")
    assert not problems, "\n".join(problems)


def test_every_configured_page_exists() -> None:
    assert set(PAGES) <= set(pages()), set(PAGES) - set(pages())


# ---------------------------------------------------------------------------------------------------------
# Running the pages


def _steps(page: str) -> list[dict]:
    config = PAGES.get(page, Page())
    steps = [{"where": f"{page}:0", "kind": "python", "text": config.setup}] if config.setup.strip() else []
    used = set()
    for block in blocks(page):
        kind = block.kind
        if kind not in RUNS_ON_THE_PAGE:
            continue
        for key, code in config.before.items():
            if key in block.text:
                used.add(key)
                steps.append({"where": f"{block.where} (before)", "kind": "python", "text": code})
        text = block.text
        command = block.argument if kind == "output of" else ""
        for old, new in config.replace.items():
            if kind != "output of":
                text = text.replace(old, new)
            command = command.replace(old, new)
        if kind == "shell" and block.is_transcript:
            kind = "transcript"
        steps.append({"where": block.where, "kind": kind, "text": text, "command": command})
    assert used == set(config.before), f"{page}: 'before' keys that match no block: {set(config.before) - used}"
    return steps


def _pages_that_run() -> list[str]:
    return [page for page in pages() if any(step["where"] != f"{page}:0" for step in _steps(page))]


def _workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A scratch directory laid out like the project's root, and the environment the page runs in."""
    cwd = tmp / "workspace"
    (cwd / ".venv" / "bin").mkdir(parents=True)
    python = cwd / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (cwd / "examples").symlink_to(ROOT / "examples")
    (tmp / "tmp").mkdir()
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("MDS_", "AWS_", "S3_", "DATABRICKS_", "DAGSTER_")) and name != "PYTHONPATH"
    }
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=str(ROOT),  # the setups in tests/docs
        MDS_DATA_DIR=str(cwd / "data"),
        MDS_JOB_ROOT=str(tmp / "jobs"),
        TMPDIR=str(tmp / "tmp"),
        DAGSTER_HOME=str(tmp / "dagster"),
    )
    return cwd, env


@pytest.mark.parametrize("page", _pages_that_run())
def test_the_page_runs(page: str, tmp_path: Path) -> None:
    cwd, env = _workspace(tmp_path)
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps(_steps(page)))
    done = subprocess.run(
        [sys.executable, "-m", "tests.docs.run_page", str(steps)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-6000:]}"


# ---------------------------------------------------------------------------------------------------------
# Data and signatures


def _parsed_blocks() -> list[Block]:
    return [block for block in all_blocks() if block.kind == "parsed"]


def _parse(block: Block):
    if block.lang == "json":
        return json.loads(block.text)
    if block.lang == "toml":
        return tomllib.loads(block.text)
    return yaml.safe_load(block.text)


@pytest.mark.parametrize("block", _parsed_blocks(), ids=lambda block: block.where)
def test_the_data_blocks_parse(block: Block) -> None:
    assert _parse(block) is not None


def test_the_registry_examples_load_and_match_the_shipped_registry(tmp_path: Path) -> None:
    from pipelines.registry import load_registry, packaged_datasets

    registries = [block for block in _parsed_blocks() if block.lang == "yaml" and "datasets" in _parse(block)]
    assert len(registries) == 2, [block.where for block in registries]
    for number, block in enumerate(registries):
        path = tmp_path / f"datasets-{number}.yaml"
        path.write_text(block.text)
        specs = load_registry(path)
        assert [spec.name for spec in specs] == [entry["name"] for entry in _parse(block)["datasets"]]
    # the first example shows the shipped registry's datasets: every field it gives is theirs (or the default)
    shipped = {spec.name: spec for spec in packaged_datasets()}
    for spec in load_registry(tmp_path / "datasets-0.yaml"):
        given = next(entry for entry in _parse(registries[0])["datasets"] if entry["name"] == spec.name)
        for name in given:
            assert getattr(spec, name) == getattr(shipped[spec.name], name), (
                f"{registries[0].where}: {spec.name}.{name}"
            )


def test_the_launchpad_example_is_config_the_assets_and_resources_accept() -> None:
    from pipelines.assets.raw import RawConfig
    from pipelines.assets.shards import ShardsConfig
    from pipelines.assets.validated import ValidateConfig
    from pipelines.resources import SmokeTestSettings, TrainingWorldSettings

    [block] = [block for block in _parsed_blocks() if block.lang == "yaml" and "ops" in _parse(block)]
    config = _parse(block)
    classes = {"raw_table": RawConfig, "validated_table": ValidateConfig, "shard_set": ShardsConfig}
    for op, settings in config["ops"].items():
        dataset, asset = op.split("__")
        assert dataset == "digits" and asset in classes, op
        classes[asset](**settings["config"])
    resources = {"smoke_settings": SmokeTestSettings, "training_world": TrainingWorldSettings}
    for name, settings in config["resources"].items():
        resources[name](**settings["config"])


def _signature_blocks() -> list[Block]:
    return [block for block in all_blocks() if block.kind == "signature of"]


@pytest.mark.parametrize("block", _signature_blocks(), ids=lambda block: block.where)
def test_the_signatures_are_the_functions(block: Block) -> None:
    """The block is the function's signature as ``inspect`` prints it, less the annotations but the return's."""
    module, _, name = block.argument.rpartition(".")
    actual = inspect.signature(getattr(importlib.import_module(module), name))
    empty = inspect.Parameter.empty
    plain = actual.replace(parameters=[p.replace(annotation=empty) for p in actual.parameters.values()])
    returned = actual.return_annotation
    expected = f"{name}{plain.replace(return_annotation=empty)} -> {getattr(returned, '__name__', returned)}"
    assert " ".join(block.text.split()).replace('"', "'") == expected, block.where
