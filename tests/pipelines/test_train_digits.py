"""examples/train_digits.py trains from the published version, stops mid-epoch, resumes, and its loss falls.

The shard set is written here with MDSWriter into a ShardSet transaction (no Spark: the pipeline's own
tests cover that path), in the layout the pipeline publishes: id, label, pixels as int8[64].
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = {"id": "int64", "label": "int32", "pixels": "ndarray:int8:64", "day": "str"}


def publish_digits(root: Path, rows: int) -> None:
    from sklearn.datasets import load_digits

    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    digits = load_digits()
    shard_set = ShardSet(str(root))
    with shard_set.transaction(mode="overwrite", publish=False) as tx:
        with MDSWriter(out=tx.out, columns=COLUMNS, compression="zstd", size_limit="16kb") as writer:
            for i in range(rows):
                writer.write(
                    {
                        "id": i,
                        "label": int(digits.target[i]),
                        "day": "2026-01-01",
                        "pixels": digits.images[i].ravel().astype(np.int8),
                    }
                )
    # A second, unpublished version: training must pick the published one, not the latest.
    with shard_set.transaction(mode="append", publish=False) as tx:
        with MDSWriter(out=tx.out, columns=COLUMNS) as writer:
            writer.write({"id": rows, "label": 0, "day": "2026-01-02", "pixels": np.zeros(64, np.int8)})
    shard_set.publish(1)


def run(args: list[str]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_digits.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_train_digits_resumes_and_its_loss_decreases(tmp_path):
    remote = tmp_path / "shard-sets" / "digits"
    publish_digits(remote, rows=600)
    common = ["--remote", str(remote), "--checkpoint", str(tmp_path / "ckpt.pt"), "--epochs", "4", "--batch-size", "32"]

    stopped = run([*common, "--stop-after-steps", "5"])
    assert stopped == [{"stopped_after_steps": 5, "epoch": 0}]
    lines = run(common)
    assert lines[0] == {"resumed": True, "version": 1, "epoch": 0, "sample_in_epoch": 160}
    epochs = [line for line in lines if "loss" in line]
    assert [e["epoch"] for e in epochs] == [1, 2, 3, 4]
    assert all(e["version"] == 1 for e in epochs)
    # The resumed first epoch still counts every sample once: 5 batches before the stop, the rest after.
    assert all(e["samples"] == 600 for e in epochs)
    losses = [e["loss"] for e in epochs]
    assert losses[-1] < losses[0] * 0.7, losses
