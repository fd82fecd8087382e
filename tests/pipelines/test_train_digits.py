"""examples/train_digits.py trains from the published version, stops mid-epoch, resumes, and its loss falls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipelines.resources import SourceSettings
from pipelines.runs import materialize_days

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str]) -> list[dict]:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_train_digits_resumes_and_its_loss_decreases(resources, tmp_path):
    resources["source"] = SourceSettings(rows_per_day=300)
    assert materialize_days(["2026-01-01", "2026-01-02"], resources, full_refresh=True).success
    remote = resources["shard_store"].url("digits")
    common = ["--remote", remote, "--checkpoint", str(tmp_path / "ckpt.pt"), "--epochs", "4", "--batch-size", "32"]

    stopped = run([*common, "--stop-after-steps", "5"])
    assert stopped == [{"stopped_after_steps": 5, "epoch": 0}]
    lines = run(common)
    assert lines[0] == {"resumed": True, "version": 1, "epoch": 0, "sample_in_epoch": 160}
    epochs = [line for line in lines if "loss" in line]
    assert [e["epoch"] for e in epochs] == [1, 2, 3, 4]
    assert all(e["version"] == 1 for e in epochs)
    # The resumed first epoch still counts every sample once: 5 batches before the stop, the rest after.
    assert epochs[0]["samples"] == 600 and all(e["samples"] == 600 for e in epochs)
    losses = [e["loss"] for e in epochs]
    assert losses[-1] < losses[0] * 0.7, losses
