"""The ``databricks`` extra alone (no torch, no pyspark) writes, converts and commits to a Volume, as the
library of a converting cluster does: the installed wheel in its own environment
(``.cache/clients/volumes-library``, ``make client-envs``), run from outside the checkout, against the
Files API server of testsupport/databricks_files.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mds_core import LocalDataset
from tests.clients.reports import download_all, run_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".cache" / "clients" / "volumes-library" / "bin" / "python"


def test_the_databricks_extra_alone_converts_and_commits_to_a_volume(volumes_server, tmp_path: Path) -> None:
    assert PYTHON.exists(), f"{PYTHON} is missing: run `make client-envs` (tests/clients/setup_envs.sh)"
    root = volumes_server.new_root()
    report = run_report(
        [str(PYTHON), str(ROOT / "tests" / "clients" / "volumes_library.py"), root],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=300,
    )
    assert report["torch"] is False and report["pyspark"] is False
    assert "site-packages" in report["mds_core"]  # the installed wheel, not the checkout
    assert report["converted_rows"] == 20 and report["version"] == 1 and report["version_rows"] == 20
    copy = download_all(f"{root}/plain", tmp_path / "plain")
    assert [LocalDataset(str(copy))[i]["name"] for i in range(10)] == [f"n{i}" for i in range(10)]
