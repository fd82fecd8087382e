"""Launch a dataset's daily job for one day the way the UI and the schedules do, and wait for it.

A run made by ``materialize()`` or ``execute_in_process`` belongs to no code location: the UI lists it
as ``__ephemeral_asset_job__`` and the Overview's timeline leaves it out. A run launched from the code
location carries its origin, so it shows under its job. Launching needs the instance's run queue to be
served, so a ``dagster-daemon`` runs while the days are launched, one after the other (each day builds
on the version the day before published).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from dagster import AssetCheckEvaluation, DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus

from mds_core.errors import MDSError

LOCATION = "pipelines"  # the name workspace.yaml and [tool.dg] give the code location
WORKSPACE = {
    "load_from": [
        {"python_module": {"module_name": "pipelines.definitions", "attribute": "defs", "location_name": LOCATION}}
    ]
}
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


class RunFailedError(MDSError):
    """A launched run did not succeed (or did not finish in time); the message says why and where to look."""


def tool(name: str) -> str:
    """A console script of this environment (``dagster``, ``dagster-daemon``), whatever PATH says."""
    return str(Path(sys.executable).with_name(name))


def write_workspace(folder: Path) -> Path:
    """A workspace file that loads the code location under its usual name, from any directory."""
    path = folder / "workspace.yaml"
    path.write_text(json.dumps(WORKSPACE))  # JSON is YAML
    return path


@contextmanager
def daemon(workspace: Path, log: IO[str]) -> Iterator[subprocess.Popen[str]]:
    """``dagster-daemon run`` for the duration: it dequeues the launched runs."""
    process = subprocess.Popen(
        [tool("dagster-daemon"), "run", "-w", str(workspace)], stdout=log, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def launch_day(
    instance: DagsterInstance,
    workspace: Path,
    job: str,
    day: str,
    log: IO[str],
    run_config: dict[str, Any] | None = None,
    timeout: float = 900.0,
) -> DagsterRun:
    """Launch ``job`` for the partition ``day`` and wait until it ends; RunFailedError unless it succeeded."""
    run_id = str(uuid.uuid4())
    command = [tool("dagster"), "job", "launch", "-w", str(workspace), "-l", LOCATION, "-j", job]
    command += ["--run-id", run_id, "--tags", json.dumps({"dagster/partition": day})]
    command += ["--config-json", json.dumps(run_config or {})]
    launched = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, text=True, check=False)
    if launched.returncode != 0:
        raise RunFailedError(f"could not launch {job} for {day} (exit {launched.returncode}); see {log.name}")
    run = wait_for(instance, run_id, timeout)
    if run.status != DagsterRunStatus.SUCCESS:
        raise RunFailedError(f"run {run_id} ({job}, {day}) ended {run.status.value}: {failure_of(instance, run_id)}")
    return run


def wait_for(instance: DagsterInstance, run_id: str, timeout: float) -> DagsterRun:
    """The run once it has finished, refused after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in FINISHED:
            return run
        if time.monotonic() > deadline:
            status = run.status.value if run is not None else "not recorded"
            raise RunFailedError(f"run {run_id} still {status} after {timeout:.0f} s (is the daemon running?)")
        time.sleep(0.5)


def failure_of(instance: DagsterInstance, run_id: str) -> str:
    """The first step failure's message, or a pointer to the run's log."""
    for record in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        error = getattr(record.dagster_event.event_specific_data, "error", None) if record.dagster_event else None
        if error is not None:
            return str(error.message).strip()
    return "no step failed; the run's event log in the UI says why"


def check_results(instance: DagsterInstance, run_id: str) -> dict[str, AssetCheckEvaluation]:
    """The run's asset check evaluations by check name, as the checks recorded them."""
    results: dict[str, Any] = {}
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = record.dagster_event.event_specific_data if record.dagster_event else None
        if isinstance(evaluation, AssetCheckEvaluation):
            results[evaluation.check_name] = evaluation
    return results
