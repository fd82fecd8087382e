import shutil
from pathlib import Path

import pytest

from tests.golden import GOLDEN
from tests.heavy import GroupScheduling, check_groups
from testsupport.spark_connect import spark_connect_server  # noqa: F401  (a session fixture)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="fail the run if any test was skipped (make test and CI: a skipped test is an untested path)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fail-on-skip") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipsFail(), "skips-fail")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> GroupScheduling:
    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    check_groups(items)


class SkipsFail:
    """Fails the run if a test was skipped; in the xdist controller, which receives every worker's reports."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.skipped.append(f"{report.nodeid}: {reason}")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.skipped:
            terminalreporter.section("--fail-on-skip: skipped tests fail the run", red=True)
            terminalreporter.line("\n".join(self.skipped))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.skipped:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def golden_copy(tmp_path: Path):
    """A writable copy of one golden dataset (reading compressed shards writes raw files beside them)."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(GOLDEN / "datasets" / name, target)
        return target

    return copy


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory):
    """A moto S3 server on 127.0.0.1 for the whole test session, with the client environment set.

    ``S3_ENDPOINT_URL`` and dummy credentials go into ``os.environ`` so that subprocesses
    (DataLoader workers, torch.distributed ranks, Spark executors) reach the same server.
    """
    from testsupport.s3 import MotoServer, s3_env

    server = MotoServer(tmp_path_factory.mktemp("moto"))
    yield from _serving(server, s3_env(server.endpoint))


@pytest.fixture
def fault_proxy(s3_server):
    """A fault-injecting proxy in front of the S3 server; ``S3_ENDPOINT_URL`` points at it meanwhile."""
    from testsupport.fault_proxy import FaultProxy

    proxy = FaultProxy(s3_server.endpoint)
    yield from _serving(proxy, {"S3_ENDPOINT_URL": proxy.endpoint})


def _serving(server, env: dict[str, str]):
    """Yield ``server`` with ``env`` in ``os.environ`` meanwhile; then put the environment back and stop it."""
    from testsupport.fault_proxy import apply_env, restore_env

    saved = apply_env(env)
    yield server
    restore_env(saved)
    server.stop()


def _emulator(kind, tmp_path_factory: pytest.TempPathFactory):
    server = kind(tmp_path_factory.mktemp(kind.name))
    yield from _serving(server, server.env(server.endpoint))


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory):
    """fake-gcs-server on 127.0.0.1 for the session; ``STORAGE_EMULATOR_HOST`` points at it (testsupport/emulators.py)."""
    from testsupport.emulators import FakeGCS

    yield from _emulator(FakeGCS, tmp_path_factory)


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory):
    """Azurite's Blob service on 127.0.0.1 for the session; ``AZURE_STORAGE_CONNECTION_STRING`` points at it."""
    from testsupport.emulators import Azurite

    yield from _emulator(Azurite, tmp_path_factory)


@pytest.fixture(scope="session")
def volumes_server(tmp_path_factory: pytest.TempPathFactory):
    """The Databricks Files API (Unity Catalog volumes) on 127.0.0.1 for the session, in a thread
    (testsupport/databricks_files.py); ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN`` point at it."""
    from testsupport.databricks_files import FilesApiServer

    yield from _emulator(FilesApiServer, tmp_path_factory)
