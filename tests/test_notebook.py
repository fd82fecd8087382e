"""examples/databricks_walkthrough.ipynb runs top to bottom (nbclient, this environment's kernel), with the
loopback Files API server as its Volume: Spark pre-processing, dataframe_to_mds to the Volume,
StreamingDataset, TorchDistributor training, a run stopped mid-epoch and resumed, and the loss plot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "databricks_walkthrough.ipynb"


def _text(cell: dict) -> str:
    return "".join(
        "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
        for output in cell.get("outputs", [])
    )


def test_the_walkthrough_runs_top_to_bottom(tmp_path: Path, monkeypatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "WALKTHROUGH_VOLUME"):
        monkeypatch.delenv(name, raising=False)  # the notebook starts its own stand-in Volume
    monkeypatch.setenv("WALKTHROUGH_DIR", str(tmp_path))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "examples")}}
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    texts = "\n".join(_text(cell) for cell in code)
    assert "1797 rows converted into" in texts and "shards at dbfs:/Volumes/main/ml/" in texts
    assert "samples; sample 0: label" in texts
    assert "stopped after step 10:" in texts
    assert "the same samples as the uninterrupted run: True" in texts
    # 1,797 samples in equal shares of 2 processes x batches of 32: the epoch pads to 1,798, as the reference does.
    assert "samples seen across the interruption: 1798 (1797 distinct), uninterrupted: 1798;" in texts
    assert any("image/png" in output.get("data", {}) for cell in code for output in cell.get("outputs", []))
    assert os.environ.get("DATABRICKS_HOST") is None  # the kernel's environment stayed its own
