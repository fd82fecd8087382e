"""`make demo` and `make ui` print no warning a user cannot act on.

The demo runs as `make demo` runs it (`python -m pipelines.demo` from the project root, a fresh
DAGSTER_HOME) on a small registry; `dg dev` is the session's, started as `make ui` starts it.
"""

from __future__ import annotations

import re

from tests.e2e.conftest import DEMO_TIER, PROJECT_ENTRIES, ROOT, DagsterDev, Demo

pytestmark = DEMO_TIER  # the demo and a real webserver

WARNING = re.compile(r"Warning|WARNING")


def warnings_in(output: str) -> list[str]:
    """Every warning line, the JVM's own included (pipelines/jvm.py leaves out the one nobody can act on)."""
    return [line for line in output.splitlines() if WARNING.search(line)]


def test_make_demo_prints_no_warnings(demo: Demo):
    assert "<- published" in demo.output
    assert not warnings_in(demo.output), "\n".join(warnings_in(demo.output))


def test_dg_dev_starts_without_warnings(dagster_dev: DagsterDev):
    assert "Serving dagster-webserver" in dagster_dev.load_log, dagster_dev.load_log
    assert not warnings_in(dagster_dev.load_log), "\n".join(warnings_in(dagster_dev.load_log))


def test_the_instance_state_stays_in_one_ignored_folder(dagster_dev: DagsterDev):
    """`make ui`'s layout: DAGSTER_HOME is the project root and its dagster.yaml, yet Dagster adds only .dagster_home/."""
    assert sorted(p.name for p in dagster_dev.home.iterdir()) == sorted([*PROJECT_ENTRIES, ".dagster_home"])
    state = dagster_dev.home / ".dagster_home"
    assert (state / "history" / "runs.db").is_file() and (state / "schedules" / "schedules.db").is_file()
    assert ".dagster_home/" in (ROOT / ".gitignore").read_text().splitlines()
