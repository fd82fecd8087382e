"""Databricks Connect, in the versions users run, against the tests' own Spark Connect server.

Each client lives in its own environment (tests/clients/setup_envs.sh, ``make client-envs``):
databricks-connect 16.1 on Python 3.11 (pyspark 3.5 inside, whose Connect DataFrame is not a
``pyspark.sql.DataFrame``) and 17.3 on Python 3.12. The server is pyspark 4.3's, its Python workers
run the client's Python version, and the Files API server of testsupport/databricks_files.py is the Volume.
The client converts the same rows locally and to the Volume, runs the pipelines' conversion step
(``pipelines.cluster.write_day`` into a shard-set version on the Volume), and makes the same bad calls,
as tests/clients/convert_client.py; the datasets, the version and the errors must equal a classic
session's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mds_core import LocalDataset, StreamingDataset, dataframe_to_mds
from tests.clients.convert_client import error_of
from tests.clients.frames import FRAME_SQL, ROWS, bad_calls, pipelines_step
from tests.clients.reports import download_all, run_report
from testsupport.spark_connect import ConnectServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / ".cache" / "clients"
# client -> (its environment, the Python its server's workers run, the pyspark inside it)
MATRIX = {
    "databricks-connect 16.1.7": ("dbc16", sys.executable, "3.5."),
    "databricks-connect 17.3.15": ("dbc17", str(CLIENTS / "dbc17" / "bin" / "python"), "4.0."),
}


@pytest.fixture(scope="module", params=list(MATRIX), ids=[env for env, _, _ in MATRIX.values()])
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, volumes_server):
    env, worker_python, _ = MATRIX[request.param]
    python = CLIENTS / env / "bin" / "python"
    assert python.exists(), f"{python} is missing: run `make client-envs` (tests/clients/setup_envs.sh)"
    server = ConnectServer(tmp_path_factory.mktemp(f"connect-{env}"), python=worker_python)
    yield request.param, python, server
    server.stop()


def _normalised(error: list[str] | None, root: str) -> list[str] | None:
    """``error`` (type, message) with the output folder ``root`` in its message written ``<out>``."""
    return None if error is None else [error[0], error[1].replace(root, "<out>")]


def test_the_client_converts_exactly_as_classic_with_the_same_errors(
    client, classic_spark, volumes_server, tmp_path: Path
) -> None:
    name, python, server = client
    volume_out = f"{volumes_server.new_root()}/ds"
    report = run_report(
        [str(python), "-m", "tests.clients.convert_client", server.url, str(tmp_path / "client"), volume_out],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert report["pyspark"].startswith(MATRIX[name][2])
    assert report["dataframe"].startswith("pyspark.sql.connect.dataframe.")
    assert report["results"] == {"local": {"rows": ROWS, "shards": report["results"]["local"]["shards"]}} | {
        "volume": report["results"]["local"]
    }

    classic = classic_spark.range(0, ROWS, 1, 3).selectExpr(*FRAME_SQL)
    dataframe_to_mds(classic, mds_kwargs={"out": str(tmp_path / "classic"), "size_limit": 4096})
    expected = _samples(LocalDataset(str(tmp_path / "classic")))
    assert _samples(LocalDataset(str(tmp_path / "client"))) == expected
    copy = download_all(volume_out, tmp_path / "volume-copy")
    assert _samples(LocalDataset(str(copy))) == expected

    classic_set = f"{volumes_server.new_root()}/classic-set"
    assert report["pipelines"] == pipelines_step(classic, classic_set)
    assert _version_samples(f"{volume_out}-set", tmp_path / "a") == _version_samples(classic_set, tmp_path / "b")

    classic_errors = {
        case: _normalised(error_of(call), str(tmp_path / "classic"))
        for case, call in bad_calls(classic_spark, classic, str(tmp_path / "classic")).items()
    }
    client_errors = {case: _normalised(error, str(tmp_path / "client")) for case, error in report["errors"].items()}
    assert client_errors == classic_errors
    assert all(error is not None and error[0].startswith("mds_core.errors.") for error in classic_errors.values())


def _version_samples(root: str, cache: Path) -> list[tuple]:
    """Every sample of version 1 of the shard set at ``root`` (not published: the pipelines publish later)."""
    dataset = StreamingDataset(remote=root, version=1, local=str(cache), batch_size=1, shuffle=False)
    return sorted(tuple(sorted((k, _plain(v)) for k, v in sample.items())) for sample in dataset)


def _samples(dataset: LocalDataset) -> list[tuple]:
    """Every sample, as comparable tuples, in id order (tasks may finish in any order)."""
    rows = [tuple((key, _plain(value)) for key, value in sorted(dataset[i].items())) for i in range(len(dataset))]
    return sorted(rows, key=lambda row: dict(row)["id"])


def _plain(value: object) -> object:
    return value.tolist() if hasattr(value, "tolist") else value
