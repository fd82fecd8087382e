"""A real `dagster dev` (webserver + daemon) on a free loopback port, with its own DAGSTER_HOME and data dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).parent / "dagster"


@dataclass
class DagsterDev:
    url: str
    home: Path
    data_dir: Path
    log: Path

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.load(response)
        if reply.get("errors"):
            raise AssertionError(f"GraphQL errors: {reply['errors']}")
        return reply["data"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


LOCATION_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def wait_until_loaded(dev: DagsterDev, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"dagster dev exited with {process.returncode}:\n{dev.log.read_text()[-4000:]}")
        try:
            entries = dev.graphql(LOCATION_QUERY)["workspaceOrError"]["locationEntries"]
        except (OSError, AssertionError):
            time.sleep(1)
            continue
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            errors = [e for e in entries if e["locationOrLoadError"]["__typename"] == "PythonError"]
            assert not errors, f"code location failed to load: {errors}"
            return
        time.sleep(1)
    raise AssertionError(f"dagster dev did not load the code location in {timeout:.0f} s:\n"
                         f"{dev.log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("dagster-dev")
    home, data_dir = base / "home", base / "data"
    home.mkdir()
    shutil.copyfile(ROOT / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "MDS_DATA_DIR": str(data_dir), "MDS_ROWS_PER_DAY": "60",
           "MDS_SPARK_MASTER": "local[2]", "MDS_SPARK_CONF": json.dumps({"spark.driver.memory": "1g"})}
    dev = DagsterDev(url=f"http://127.0.0.1:{port}", home=home, data_dir=data_dir, log=base / "dagster-dev.log")
    with dev.log.open("w") as log:
        process = subprocess.Popen(
            [str(DAGSTER), "dev", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_loaded(dev, process)
        yield dev
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group dagster dev leads (webserver, daemon, code server), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    try:  # children that outlived their parent
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
