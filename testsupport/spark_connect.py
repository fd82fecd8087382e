"""A real Spark Connect server for the tests, started from pyspark's own distribution.

pyspark 4.3 ships the server (``pyspark/jars/spark-connect_*.jar``); ``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` starts it as its own JVM, here with the same
settings as the classic test session (``local[2,2]``: two cores, two attempts per task) on a free port of
127.0.0.1. Its Python workers run this interpreter from the project root, so they import ``mds_core``
and the test modules (UDFs defined in tests) as the classic session's do.

The ``spark_connect_server`` fixture (registered in ``tests/conftest.py``) starts one per test session,
or per xdist worker, on first use, after the S3 test server when the suite has one so that the server
and its Python workers inherit ``S3_ENDPOINT_URL`` and the credentials.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testsupport.fault_proxy import free_port

ROOT = Path(__file__).resolve().parent.parent
# The tests' Spark JVMs run many short jobs on tiny data: the C1 compiler alone and the serial collector make
# them about a sixth faster than the JIT's full tiers (measured on the pipelines' and converter's tests).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The local sessions' driver options (tests/spark and tests/pipelines: whichever starts first makes the one
# session of the process), keeping the pipelines' log settings, which a driver option of our own replaces.
SESSION_JVM_OPTIONS = f"{TEST_JVM_OPTIONS} -Dlog4j2.configurationFile=file:{ROOT / 'pipelines' / 'log4j2.properties'}"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT = 240.0  # seconds; a loaded two-core machine takes well over a minute at worst


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """``spark-submit`` running the Spark Connect server on ``127.0.0.1:<port>``; ``url`` is ``sc://...``."""

    def __init__(
        self, root: Path, master: str = "local[2,2]", driver_memory: str = "1g", python: str = sys.executable
    ) -> None:
        """``python`` runs the server's Python workers: a client's own interpreter for a client of another Python."""
        import pyspark

        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = root / "connect-server.log"
        home = Path(pyspark.__file__).parent
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.sql.warehouse.dir": str(root / "warehouse"),
            "spark.local.dir": str(root / "local"),
            "spark.sql.session.timeZone": "UTC",
            "spark.python.worker.reuse": "true",
            "spark.driver.extraJavaOptions": f"{TEST_JVM_OPTIONS} -Dderby.system.home={root / 'derby'}",
        }
        command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "mds-core-tests-connect"]
        command += ["--master", master, "--driver-memory", driver_memory]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        env.pop("SPARK_REMOTE", None)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        started = time.monotonic()
        with open(self.log, "wb") as log:
            # Its own process group, so stop() ends the JVM and the Python workers it started.
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        while not _accepts(self.port):
            if self.process.poll() is not None or time.monotonic() - started > START_TIMEOUT:
                self.stop()
                raise RuntimeError(
                    f"the Spark Connect server did not start on {self.url}; its log:\n"
                    + self.log.read_text(errors="replace")[-4000:]
                )
            time.sleep(0.25)
        self.start_seconds = time.monotonic() - started

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture(scope="session")
def spark_connect_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One Spark Connect server for the test session (per xdist worker), stopped at its end."""
    pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the 'connect' extra")
    with contextlib.suppress(pytest.FixtureLookupError):
        request.getfixturevalue("s3_server")
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    yield server
    _close_clients()
    server.stop()


def _close_clients() -> None:
    """Close this process's Connect sessions before their server goes: a client left open tries to release
    its session when Python exits, and retries that for minutes against a server that is gone."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    candidates = (ConnectSession.getActiveSession(), ConnectSession._get_default_session())
    for session in {session for session in candidates if session is not None}:  # often one session, twice
        session.client.close()  # no call to the server; stop() then skips the release too
        session.stop()
