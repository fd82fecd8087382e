import shutil
from pathlib import Path

import pytest

from tests.golden import GOLDEN


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
