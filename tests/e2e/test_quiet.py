"""`make demo` and `make ui` print no warning a user cannot act on.

The demo runs as `make demo` runs it (`python -m pipelines.demo` from the project root, a fresh
DAGSTER_HOME) on a small registry; `dg dev` is the session's, started as `make ui` starts it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT, DagsterDev
from tests.registry import write_registry

pytestmark = pytest.mark.slow  # a real webserver and its runs: make test-all

WARNING = re.compile(r"Warning|WARNING")
# Printed by the JVM itself, not by us or by Spark's loggers: Spark 4.3's launcher always passes
# --add-modules=jdk.incubator.vector (org.apache.spark.launcher.JavaModuleOptions), and the JVM announces
# every incubator module it loads on stderr; no JVM or Spark setting turns that line off.
NOT_OURS = ("WARNING: Using incubator modules: jdk.incubator.vector",)


def warnings_in(output: str) -> list[str]:
    return [line for line in output.splitlines() if WARNING.search(line) and line.strip() not in NOT_OURS]


def test_make_demo_prints_no_warnings(tmp_path):
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "MDS_DATA_DIR": str(tmp_path / "data"),
        "MDS_DATASETS": str(write_registry(tmp_path / "datasets.yaml", rows_per_day=60)),
        "MDS_SPARK_MASTER": "local[2]",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "<- published" in done.stdout
    assert not warnings_in(output), "\n".join(warnings_in(output))


def test_dg_dev_starts_without_warnings(dagster_dev: DagsterDev):
    assert "Serving dagster-webserver" in dagster_dev.load_log, dagster_dev.load_log
    assert not warnings_in(dagster_dev.load_log), "\n".join(warnings_in(dagster_dev.load_log))
