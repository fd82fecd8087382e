"""Run an operation in a child process, list its steps, kill it at step k, and check what is left.

The checks are the guarantees of docs/remote-storage.md ("Crash consistency"): whatever step a
process dies at, (a) the published version reads completely and verifies, (b) nothing half-written
is visible as finished, (c) a rerun or ``vacuum`` cleans up, and (d) the operation can be retried.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mds_core.storage.kill_points import AT_VARIABLE, LOG_VARIABLE

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Killed:
    step: str  # the step the process died at
    number: int


def run(operation: str, args: dict[str, Any], log_dir: Path, kill_at: int | None = None) -> list[str]:
    """Run ``operation`` in a child; the steps it logged (all of them, or up to the kill)."""
    log = log_dir / f"steps-{uuid.uuid4().hex[:8]}.log"
    env = {**os.environ, LOG_VARIABLE: str(log), "PYTHONPATH": str(ROOT)}
    env.pop(AT_VARIABLE, None)
    if kill_at is not None:
        env[AT_VARIABLE] = str(kill_at)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.crash.operations", operation, json.dumps(args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    steps = log.read_text().splitlines() if log.exists() else []
    if kill_at is None:
        assert proc.returncode == 0, f"{operation} failed:\n{proc.stderr[-3000:]}"
    else:
        assert proc.returncode == -signal.SIGKILL, (
            f"{operation} was to die at step {kill_at} but exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return steps


def steps_of(operation: str, args: dict[str, Any], log_dir: Path) -> list[str]:
    steps = run(operation, args, log_dir)
    assert steps, f"{operation} passed no kill point"
    return steps


def kill_at(operation: str, args: dict[str, Any], log_dir: Path, number: int) -> Killed:
    steps = run(operation, args, log_dir, kill_at=number)
    assert len(steps) == number, f"expected to die at step {number}, the log has {len(steps)} steps"
    return Killed(steps[-1], number)
