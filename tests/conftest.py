import shutil
from pathlib import Path

import pytest

from tests.golden import GOLDEN
from tests.spark_connect import spark_connect_server  # noqa: F401  (a session fixture)


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
    from tests.s3 import MotoServer, apply_env, restore_env, s3_env

    server = MotoServer(tmp_path_factory.mktemp("moto"))
    saved = apply_env(s3_env(server.endpoint))
    yield server
    restore_env(saved)
    server.stop()


@pytest.fixture
def fault_proxy(s3_server):
    """A fault-injecting proxy in front of the S3 server; ``S3_ENDPOINT_URL`` points at it meanwhile."""
    from tests.s3 import FaultProxy, apply_env, restore_env

    proxy = FaultProxy(s3_server.endpoint)
    saved = apply_env({"S3_ENDPOINT_URL": proxy.endpoint})
    yield proxy
    restore_env(saved)
    proxy.stop()


def _emulator(kind, tmp_path_factory: pytest.TempPathFactory):
    from tests.s3 import apply_env, restore_env

    server = kind(tmp_path_factory.mktemp(kind.name))
    saved = apply_env(server.env(server.endpoint))
    yield server
    restore_env(saved)
    server.stop()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory):
    """fake-gcs-server on 127.0.0.1 for the session; ``STORAGE_EMULATOR_HOST`` points at it (tests/emulators.py)."""
    from tests.emulators import FakeGCS

    yield from _emulator(FakeGCS, tmp_path_factory)


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory):
    """Azurite's Blob service on 127.0.0.1 for the session; ``AZURE_STORAGE_CONNECTION_STRING`` points at it."""
    from tests.emulators import Azurite

    yield from _emulator(Azurite, tmp_path_factory)


@pytest.fixture(scope="session")
def volumes_server(tmp_path_factory: pytest.TempPathFactory):
    """The Databricks Files API (Unity Catalog volumes) on 127.0.0.1 for the session, in a thread
    (tests/databricks_files.py); ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN`` point at it."""
    from tests.databricks_files import FilesApiServer

    yield from _emulator(FilesApiServer, tmp_path_factory)
