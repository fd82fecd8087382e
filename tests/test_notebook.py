"""examples/databricks_walkthrough.ipynb runs top to bottom (nbclient, this environment's kernel), with the
loopback Files API server as its Volume: a Delta table's pinned version read by delta-rs and pre-processed
by Spark, dataframe_to_mds into a shard-set version on the Volume that records the table version,
StreamingDataset, TorchDistributor training, a run stopped mid-epoch and resumed, the loss plot, the
checkpoint's data record and which table rows were in step 10."""

from __future__ import annotations

import json
import os
import re
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
    volume = re.search(r"^Volume: (\S+)$", texts, re.MULTILINE)
    assert volume is not None and volume[1].startswith("dbfs:/Volumes/main/ml/")
    dataset, table = f"{volume[1]}/digits", tmp_path / "digits-table"
    assert f"Delta table {table}: version 1 has 1797 rows (version 0: 1500)" in texts
    assert f"1797 rows converted into 8 shards at {dataset}\n" in texts
    assert "shard-set version 1, from Delta table version 1\n" in texts
    assert "samples; sample 0: label" in texts
    assert "stopped after step 10:" in texts
    assert "the same samples as the uninterrupted run: True" in texts
    # 1,797 samples in equal shares of 2 processes x batches of 32: the epoch pads to 1,798, as the reference does.
    assert "samples seen across the interruption: 1798 (1797 distinct), uninterrupted: 1798;" in texts
    assert any("image/png" in output.get("data", {}) for cell in code for output in cell.get("outputs", []))
    _assert_the_data_named(texts, dataset, table)
    _assert_step_10(texts, tmp_path)
    assert os.environ.get("DATABRICKS_HOST") is None  # the kernel's environment stayed its own


def _assert_the_data_named(texts: str, dataset: str, table: Path) -> None:
    """The resumed run's checkpoint names the shard set, its version and the Delta table version it holds."""
    from deltalake import DeltaTable

    source = {"kind": "delta", "table_uri": f"file://{table}", "table_id": DeltaTable(table).metadata().id}
    record = [{"root": dataset, "version": 1, "lineage": {"source": source | {"versions": [1, 1]}}}]
    assert f"data: {json.dumps(record)}\n" in texts


def _assert_step_10(texts: str, work: Path) -> None:
    """mds_core.plan.which's samples of step 10 hold the table rows the uninterrupted run trained on then."""
    for rank in (0, 1):
        trained = json.loads((work / f"whole.pt.seen-{rank}").read_text().splitlines()[9])
        samples = re.search(rf"^step 10, rank {rank}: samples (\[.*\])\n  table ids (\[.*\])$", texts, re.MULTILINE)
        assert samples is not None and json.loads(samples[2]) == trained
        assert len(set(json.loads(samples[1]))) == 32
    assert "the rows the uninterrupted run trained on at step 10: True\n" in texts
