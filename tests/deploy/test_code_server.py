"""The production shape on loopback (docs/deployment.md): `dagster code-server start` serves the location over
gRPC; `dagster-webserver` and `dagster-daemon` reach it through a workspace.yaml of `grpc_server` entries.

A schedule and a sensor each start a run through the daemon's queue (the packaged instance settings:
QueuedRunCoordinator, one shard-set writer at a time), and both runs succeed. Then the code server is
restarted with a changed registry, and the running webserver serves the new dataset after a reload.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.instance import prepare_home
from tests.e2e.conftest import DagsterDev, stop
from testsupport.fault_proxy import free_port

pytestmark = pytest.mark.slow  # three servers and two Spark runs: make test-all

BIN = Path(sys.executable).parent
LANDED_DAY = "2026-11-20"
RUNS_QUERY = """
query Runs($name: String!, $tag: String!) { runsOrError(filter: {tags: [{key: $tag, value: $name}]}) {
  ... on Runs { results { runId status tags { key value } } } } }
"""
ASSETS_QUERY = "{ assetNodes { assetKey { path } } }"
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "pipelines") {
  __typename ... on WorkspaceLocationEntry { loadStatus } } }
"""


def registry(path: Path, names: list[str]) -> Path:
    """Small synthetic datasets whose daily schedule ticks every minute."""
    entries = [
        {
            "name": name,
            "source": {"kind": "synthetic", "rows_per_day": 100},
            "schema_ref": "pipelines.schemas:DIGITS",
            "start_date": "2026-11-01",
            "schedule": "* * * * *",
        }
        for name in names
    ]
    path.write_text(yaml.safe_dump({"datasets": entries}, sort_keys=False))
    return path


def land_a_day(landing: Path, dataset: str, rows: int = 50) -> None:
    """A Parquet file with the digits schema's types, as an upstream system would drop it."""
    table = pa.table(
        {
            "id": pa.array(range(10_000, 10_000 + rows), pa.int64()),
            "label": pa.array([i % 10 for i in range(rows)], pa.int32()),
            "pixels": pa.array([[i % 17] * 64 for i in range(rows)], pa.list_(pa.int8())),
        }
    )
    folder = landing / dataset / LANDED_DAY
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")


def start(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    with log.open("a") as out:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(what: str, check, timeout: float, logs: list[Path], processes: dict[str, subprocess.Popen]):
    """``check()``'s first truthy answer; fails at once when a server has exited, else after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = [name for name, process in processes.items() if process.poll() is not None]
        found = None if exited else check()
        if found:
            return found
        if exited or time.monotonic() >= deadline:
            break
        time.sleep(2)
    tails = "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs)
    raise AssertionError(f"{what} not within {timeout:.0f} s (exited: {exited})\n{tails}")


IN_PROGRESS_QUERY = """
{ runsOrError(filter: {statuses: [STARTING, STARTED, CANCELING]}) { ... on Runs { results { runId } } } }
"""


def in_progress(dev: DagsterDev) -> list[dict]:
    return dev.graphql(IN_PROGRESS_QUERY)["runsOrError"]["results"]


def serves(dev: DagsterDev, dataset: str, reload: bool = False) -> bool:
    """Whether the webserver lists ``dataset``'s raw table (after reloading the location, if asked)."""
    try:
        if reload:
            dev.graphql(RELOAD)
        nodes = dev.graphql(ASSETS_QUERY)["assetNodes"]
    except (OSError, AssertionError):  # not up yet, or the location is reloading
        return False
    return any(n["assetKey"]["path"] == [dataset, "raw_table"] for n in nodes)


def finished(dev: DagsterDev, tag: str, name: str) -> list[dict]:
    """The finished runs whose tag ``tag`` is ``name``."""
    runs = dev.graphql(RUNS_QUERY, {"tag": tag, "name": name})["runsOrError"]["results"]
    return [r for r in runs if r["status"] in ("SUCCESS", "FAILURE", "CANCELED")]


@pytest.mark.timeout(900)  # two Spark runs one after the other, and a schedule that ticks once a minute
def test_a_scheduled_and_a_sensed_run_go_through_the_daemon_and_a_restarted_code_server_is_picked_up(
    tmp_path: Path,
) -> None:
    home, data, landing = tmp_path / "home", tmp_path / "data", tmp_path / "data" / "landing"
    assert prepare_home(home) == []  # python -m pipelines.instance $DAGSTER_HOME
    grpc_port, web_port = free_port(), free_port()
    (tmp_path / "workspace.yaml").write_text(
        yaml.safe_dump(
            {"load_from": [{"grpc_server": {"host": "127.0.0.1", "port": grpc_port, "location_name": "pipelines"}}]}
        )
    )
    dagster_env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    code_env = {
        **dagster_env,
        "MDS_DATASETS": str(registry(tmp_path / "datasets.yaml", ["events"])),
        "MDS_DATA_DIR": str(data),
        "MDS_SPARK_MASTER": "local[1]",
        "MDS_AUTOMATION": "on",  # schedules and sensors start running
    }
    logs = {name: tmp_path / f"{name}.log" for name in ("code-server", "webserver", "daemon")}
    code_server_command = [
        str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p", str(grpc_port),
        "-m", "pipelines.definitions", "--location-name", "pipelines",
    ]  # fmt: skip
    # The instance's databases first, as the deployment page says: a webserver and a daemon that both find
    # them missing may both create them (SQLite, alembic: "more than one head present").
    subprocess.run([str(BIN / "dagster"), "instance", "migrate"], env=dagster_env, check=True, capture_output=True)
    processes = {"code-server": start(code_server_command, logs["code-server"], code_env, tmp_path)}
    try:
        workspace = ["-w", str(tmp_path / "workspace.yaml")]
        processes["webserver"] = start(
            [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(web_port), *workspace],
            logs["webserver"],
            dagster_env,
            tmp_path,
        )
        dev = DagsterDev(url=f"http://127.0.0.1:{web_port}", home=home, data_dir=data, log=logs["webserver"])

        def wait(what: str, check, timeout: float):
            return wait_for(what, check, timeout, list(logs.values()), processes)

        wait("the webserver serving the code server's location", lambda: serves(dev, "events"), 180)
        land_a_day(landing, "events")
        processes["daemon"] = start(
            [str(BIN / "dagster-daemon"), "run", *workspace], logs["daemon"], dagster_env, tmp_path
        )

        scheduled = wait(
            "a finished scheduled run", lambda: finished(dev, "dagster/schedule_name", "events_daily_schedule"), 420
        )
        sensed = wait(
            "a finished sensor run", lambda: finished(dev, "dagster/sensor_name", "events_landing_sensor"), 420
        )
        assert scheduled[-1]["status"] == "SUCCESS", scheduled  # the first; later ticks may request the day again
        assert [r["status"] for r in sensed] == ["SUCCESS"], sensed
        tags = {t["key"]: t["value"] for t in sensed[0]["tags"]}
        assert tags["dagster/partition"] == LANDED_DAY and tags["mds/landing"].endswith(f"events/{LANDED_DAY}")
        # Both went through the queue: the daemon's QueuedRunCoordinatorDaemon launched them.
        launched = re.findall(r"QueuedRunCoordinatorDaemon .*Launched (\d+) runs", logs["daemon"].read_text())
        assert sum(int(n) for n in launched) >= 2, logs["daemon"].read_text()[-3000:]

        from mds_core.versions import ShardSet

        shard_set = ShardSet(str(data / "shard-sets" / "events"))
        days = {day for info in shard_set.versions() for day in info.lineage.get("days", [])}
        assert LANDED_DAY in days and shard_set.published() is not None

        # The schedule ticks every minute and requests the same day again; stop the daemon and let any run
        # it launched finish, so the restart below interrupts no run.
        stop(processes.pop("daemon"))
        wait("no run in progress", lambda: not in_progress(dev), 420)

        # A new registry: restart the code server alone, reload the location in the running webserver.
        stop(processes.pop("code-server"))
        code_env["MDS_DATASETS"] = str(registry(tmp_path / "datasets-2.yaml", ["events", "clicks"]))
        processes["code-server"] = start(code_server_command, logs["code-server"], code_env, tmp_path)
        webserver = processes["webserver"]

        wait("the webserver serving the new registry", lambda: serves(dev, "clicks", reload=True), 180)
        assert webserver.poll() is None  # the same webserver process throughout
    finally:
        for process in processes.values():
            stop(process)
    assert not any("Traceback" in log.read_text() for log in logs.values()), [
        log.read_text()[-3000:] for log in logs.values() if "Traceback" in log.read_text()
    ]


def test_the_deployment_page_runs_the_commands_tested_here() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    assert (
        '"dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "4000", \\\n     "-m", "pipelines.definitions", "--location-name", "pipelines"'
        in page
    )
    assert "dagster-webserver -h 0.0.0.0 -p 3000 -w workspace.yaml\ndagster-daemon run -w workspace.yaml" in page
    assert "\ndagster instance migrate " in page
    assert "python -m pipelines.instance $DAGSTER_HOME" in page
