"""What `make ui` starts, `dg dev` (webserver + daemon), on a free loopback port, with its own data dir and a
secret in MDS_SPARK_CONF that the UI must never show.

It runs as `make ui` runs it, in a project folder with DAGSTER_HOME at its root and the project's
top-level dagster.yaml, but the folder is a scratch copy of the project's entry files (links to
pyproject.toml, dagster.yaml, workspace.yaml and the pipelines package), so the runs' state goes to the
copy's .dagster_home/, not the checkout's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.registry import write_registry
from testsupport.fault_proxy import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DG = VENV_BIN / "dg"
# In $MDS_SPARK_CONF (harmless for local Spark): tests/e2e/test_operations.py checks no GraphQL answer shows it.
SECRET = "mds-e2e-s3cr3t-9f1c27d4e8"
# For the modules that use the session's `demo` (make test-all): the first test to ask for it also waits for it to
# be made, `make demo`'s three days and dg dev's start, over 300 s when the other tier's worker runs the
# standalone cluster beside it.
DEMO_TIER = [pytest.mark.slow, pytest.mark.timeout(900)]


@dataclass
class DagsterDev:
    url: str
    home: Path  # the project folder: DAGSTER_HOME, as `make ui` sets it
    data_dir: Path
    log: Path
    load_log: str = ""  # the log as it stood once the code location had loaded

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.load(response)
        if reply.get("errors"):
            raise AssertionError(f"GraphQL errors: {reply['errors']}")
        return reply["data"]


LOCATION_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def wait_until_loaded(dev: DagsterDev, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"dg dev exited with {process.returncode}:\n{dev.log.read_text()[-4000:]}")
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
    raise AssertionError(f"dg dev did not load the code location in {timeout:.0f} s:\n{dev.log.read_text()[-4000:]}")


PROJECT_ENTRIES = ("pyproject.toml", "dagster.yaml", "workspace.yaml", "pipelines")


def project_folder(base: Path) -> Path:
    """A folder that `dg dev` takes for the project: links to its entry files, nothing else."""
    folder = base / "project"
    folder.mkdir()
    for name in PROJECT_ENTRIES:
        (folder / name).symlink_to(ROOT / name)
    return folder


def dev_environment(base: Path) -> dict[str, str]:
    """As `make ui` runs dg: the project's virtual environment active, from the project root, which is DAGSTER_HOME
    (a project folder under ``base``, with a data folder and a small registry beside it)."""
    return {
        **os.environ,
        "VIRTUAL_ENV": str(VENV_BIN.parent),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "DAGSTER_HOME": str(project_folder(base)),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "MDS_DATA_DIR": str(base / "data"),
        "MDS_DATASETS": str(write_registry(base / "datasets.yaml", rows_per_day=60)),
        "MDS_SPARK_MASTER": "local[2]",
        "MDS_SPARK_CONF": json.dumps({"spark.driver.memory": "1g", "spark.hadoop.fs.s3a.secret.key": SECRET}),
    }


@contextmanager
def running_dg_dev(base: Path, env: dict[str, str]) -> Iterator[DagsterDev]:
    """`dg dev` on a free port, from the project folder ``env["DAGSTER_HOME"]``, until the block ends."""
    home, port = Path(env["DAGSTER_HOME"]), free_port()
    dev = DagsterDev(
        url=f"http://127.0.0.1:{port}", home=home, data_dir=Path(env["MDS_DATA_DIR"]), log=base / "dg-dev.log"
    )
    with dev.log.open("w") as log:
        process = subprocess.Popen(
            [str(DG), "dev", "-h", "127.0.0.1", "-p", str(port)],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_loaded(dev, process)
        dev.load_log = dev.log.read_text()
        yield dev
    finally:
        stop(process)


@pytest.fixture(scope="session")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("dagster-dev")
    with running_dg_dev(base, dev_environment(base)) as dev:
        yield dev


@dataclass
class Demo:
    """`make demo` run in a project folder, then `make ui` on what it left."""

    output: str  # the demo's stdout and stderr
    dev: DagsterDev


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """As `make demo` then `make ui`: the demo's runs in DAGSTER_HOME, and dg dev on the registry it wrote."""
    base = tmp_path_factory.mktemp("demo")
    env = dev_environment(base)
    demo_env = {key: value for key, value in env.items() if key != "PYTHONWARNINGS"}  # make demo sets none
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.demo"],
        cwd=env["DAGSTER_HOME"],
        env=demo_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    with running_dg_dev(base, {**env, "MDS_DATASETS": str(base / "data" / "demo-datasets.yaml")}) as dev:
        yield Demo(output=output, dev=dev)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group dg dev leads (webserver, daemon, code server), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # children that outlived their parent
        os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "install Debian's chromium and chromium-driver (.ci/run does)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1600,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(service=Service(driver), options=options)
    yield session
    session.quit()
