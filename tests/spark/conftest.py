"""Real Spark sessions for the whole run: a classic local one and, where a test asks, a Spark Connect one.

``spark`` is a classic local session. A test of a path that differs on Spark Connect (the job's tag
and progress, errors coming back from the server, expressions built with the Connect functions, the
reachability check) carries ``@pytest.mark.connect_too`` and runs once on each: the classic session,
then a Spark Connect session (``testsupport/spark_connect.py``: a real Connect server from pyspark's
distribution on 127.0.0.1). The converter's other behaviour (types, bytes, kill points, retries) is the
same code on both, so those tests run on the classic session only. A test that needs the classic API
for its own setup (``sparkContext``, RDDs) takes ``classic_spark``. Each kind is started on first use
and kept to the end of the run; every test using one runs on the same xdist worker (``tests/heavy.py``),
so each starts once per run.

``local[2,2]``: two cores and up to two attempts per task, so a task that fails once is retried
as it would be on a cluster. The S3 test server, when the suite provides it, is started first so the
JVMs and their Python workers inherit its environment (``S3_ENDPOINT_URL`` and credentials).

``pyspark.sql.functions`` builds classic or Connect columns depending on a process-wide flag
(``SPARK_CONNECT_MODE_ENABLED``, which pyspark sets when a Connect session is created). Both kinds live in
one process here, so ``_spark_api_mode`` sets the flag for the duration of each Connect test and clears
it otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark tests need the 'spark' extra")

from testsupport.spark_connect import SESSION_JVM_OPTIONS

MODES = ["classic", "connect"]
CONNECT_FLAG = "SPARK_CONNECT_MODE_ENABLED"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "connect_too: also run on a Spark Connect session (a Connect-specific path)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spark" in metafunc.fixturenames:
        modes = MODES if metafunc.definition.get_closest_marker("connect_too") else MODES[:1]
        metafunc.parametrize("spark", modes, indirect=True, scope="session")


class _Sessions:
    def __init__(self, request: pytest.FixtureRequest, root) -> None:
        self._request, self._root = request, root
        self._sessions: dict[str, Any] = {}

    def get(self, mode: str):
        if mode not in self._sessions:
            self._sessions[mode] = self._classic() if mode == "classic" else self._connect()
        return self._sessions[mode]

    def _classic(self):
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        root = self._root / "classic"
        session = (
            SparkSession.builder.master("local[2,2]")
            .appName("mds-core-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "4")
            .config("spark.sql.warehouse.dir", str(root / "warehouse"))
            .config("spark.local.dir", str(root / "local"))
            .config("spark.driver.memory", "1g")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.worker.reuse", "true")
            .config("spark.driver.extraJavaOptions", SESSION_JVM_OPTIONS)
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        return session

    def _connect(self):
        from mds_core.convert.spark_connect import connect_session

        server = self._request.getfixturevalue("spark_connect_server")
        session = connect_session(server.url)
        os.environ.pop(CONNECT_FLAG, None)  # set per test by _spark_api_mode
        return session

    def stop(self) -> None:
        for mode, session in self._sessions.items():
            if mode == "connect":  # the server stops next: no release call that could wait on it
                session.client.close()
            session.stop()


@pytest.fixture(scope="session")
def _spark_sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    # No S3 server in this suite: the S3 test is not collected either.
    with contextlib.suppress(pytest.FixtureLookupError):
        request.getfixturevalue("s3_server")
    sessions = _Sessions(request, tmp_path_factory.mktemp("spark"))
    yield sessions
    sessions.stop()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, _spark_sessions: _Sessions):
    """The classic local session; for tests marked ``connect_too``, also a Spark Connect session."""
    return _spark_sessions.get(request.param)


@pytest.fixture(scope="session")
def classic_spark(_spark_sessions: _Sessions):
    """The classic session, for tests that need the classic API (sparkContext, RDDs) themselves."""
    return _spark_sessions.get("classic")


@pytest.fixture(autouse=True)
def _spark_api_mode(request: pytest.FixtureRequest):
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("spark") == "connect":
        os.environ[CONNECT_FLAG] = "1"
    else:
        os.environ.pop(CONNECT_FLAG, None)
    yield
    os.environ.pop(CONNECT_FLAG, None)
