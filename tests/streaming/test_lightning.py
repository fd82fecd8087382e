"""PyTorch Lightning: ``StreamingDataModule``, and a plain user ``LightningDataModule``, under ``Trainer(accelerator="cpu", devices=2, strategy="ddp")``
over gloo (tests/clients/lightning_train.py, in its own processes, as Lightning's launcher re-runs the
script for rank 1). A run killed after step k, resumed from the checkpoint saved at step k, gives every
rank the batches of an uninterrupted run; each sample is seen once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.streaming.support import write_rows

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "clients" / "lightning_train.py"
ROWS, STOP = 160, 3


def _train(dataset: Path, work: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    (work / "trace").mkdir(parents=True, exist_ok=True)
    args = [str(dataset), str(work / "cache"), str(work / "trace"), str(work / "last.ckpt"), *flags]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=240)


def _trace(work: Path) -> dict[int, list[list[int]]]:
    return {
        r: [json.loads(line) for line in (work / "trace" / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    }


@pytest.mark.parametrize("module", ["StreamingDataModule", "user module"])
def test_a_mid_epoch_checkpoint_resumes_the_loader_exactly(tmp_path: Path, module: str) -> None:
    flags = ("--user-module",) if module == "user module" else ()
    rows = ({"id": i, "features": np.array([i % 5, 1, 2, i % 3], dtype=np.float32)} for i in range(ROWS))
    dataset = write_rows(tmp_path / "ds", {"id": "int64", "features": "ndarray:float32:4"}, rows, size_limit=1 << 10)
    whole = _train(dataset, tmp_path / "whole", *flags)
    assert whole.returncode == 0, whole.stderr[-3000:]
    uninterrupted = _trace(tmp_path / "whole")
    assert sorted(i for batches in uninterrupted.values() for batch in batches for i in batch) == list(range(ROWS))

    work = tmp_path / "killed"
    killed = _train(dataset, work, "--stop-at", str(STOP), *flags)
    assert killed.returncode == -9, killed.stderr[-3000:]  # SIGKILL, after the checkpoint of step k
    assert _trace(work) == {r: batches[:STOP] for r, batches in uninterrupted.items()}
    for r in (0, 1):
        (work / "trace" / f"rank{r}.jsonl").unlink()
    resumed = _train(dataset, work, "--resume", *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _trace(work) == {r: batches[STOP:] for r, batches in uninterrupted.items()}
