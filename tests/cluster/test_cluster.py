"""dataframe_to_mds and the Dagster graph on a real standalone cluster: a master and two workers on 127.0.0.1.

See tests/cluster/conftest.py for the cluster and tests/cluster/driver.py for what each driver does.
"""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import run_driver
from tests.registry import write_registry
from testsupport.fault_proxy import free_port

pytestmark = pytest.mark.slow  # a master and two workers, and the whole graph on them: make test-all


@pytest.fixture(scope="module")
def converted(spark_cluster, cluster_conf, s3_server, tmp_path_factory) -> dict:
    """One application for (a) and (c): eight partitions to S3, a shared local out, a driver-only out."""
    root = tmp_path_factory.mktemp("convert")
    hidden = spark_cluster.hidden  # None where mount namespaces are not allowed: (c) is skipped then
    return run_driver(
        {
            "scenario": "convert",
            "master": spark_cluster.master_url,
            "conf": cluster_conf,
            "s3_url": f"s3://{s3_server.new_bucket()}/datasets/eight",
            "scratch": str(root),
            "shared_out": str(root / "shared-out"),
            "hidden_out": str(hidden / "out") if hidden else None,
        }
    )


def _worker_of(where: str, cluster) -> int:
    for index, work in enumerate(cluster.worker_dirs):
        if where.startswith(str(work) + "/"):
            return index
    raise AssertionError(f"{where} is in no worker's work dir")


def test_to_s3_from_both_workers_read_back_exactly(converted, spark_cluster) -> None:
    print({k: round(v, 1) for k, v in converted.items() if k.endswith("seconds")})
    assert converted["default_parallelism"] == 2  # 2 workers x 1 core
    assert converted["s3_rows_per_partition"] == [500] * 8
    assert converted["s3_staging_left"] == []
    back = converted["s3"]
    assert back["rows"] == 4000 and back["ids_in_order"] and back["exact"], back
    # Each row carries the working directory of the task that computed and wrote it: the executors'
    # directories <work-dir>/<app-id>/<executor-id> of both workers.
    assert {_worker_of(where, spark_cluster) for where in back["where"]} == {0, 1}, back["where"]
    # mds_core came from the zip in spark.submit.pyFiles: the executors' own Python does not have it; each
    # executor's scratch (SPARK_LOCAL_DIRS, where remote shards are staged) is under its own worker's local dir.
    seen = converted["executor_mds_core"]
    assert all("/mds_core.zip/mds_core/__init__.py" in path for path, _, _ in seen), seen
    for _, local_dirs, cwd in seen:
        worker = _worker_of(cwd, spark_cluster)
        assert local_dirs.startswith(str(spark_cluster.local_dirs[worker]) + "/"), (local_dirs, cwd)
    executors = spark_cluster.executor_dirs()
    assert all(executors[i] for i in (0, 1)), executors


def test_shared_local_out_with_one_task_per_core(converted) -> None:
    assert converted["shared_rows_per_partition"] == [2000, 2000]  # num_tasks='auto': the 2 cores
    assert converted["shared_dirs"] == ["00000", "00001", "index.json"]
    shared = converted["shared"]
    assert shared["rows"] == 4000 and shared["every_id_once"] and shared["exact"], shared


def test_driver_only_local_out_fails_fast_and_writes_nothing(converted, spark_cluster) -> None:
    # The workers run in a mount namespace of their own (unshare --mount) with a tmpfs over this path.
    assert spark_cluster.hidden is not None, "this machine allows no mount namespace (unshare --mount)"
    error = converted["hidden_error"]
    assert error is not None and error["type"] == "ConfigurationError", error
    assert "cannot see" in error["message"] and "shared directory" in error["message"]
    assert "URL (s3://" in error["message"] and "Nothing was written" in error["message"]
    assert converted["hidden_seconds"] < 30
    assert not converted["hidden_exists_on_driver"]  # the probe's directories are removed again
    view = spark_cluster.worker_view(spark_cluster.hidden)  # the executors' own disk at that path
    assert view.is_dir() and list(view.iterdir()) == []


@pytest.fixture(scope="module")
def pipeline_run(spark_cluster, cluster_conf, s3_server, tmp_path_factory) -> dict:
    """One driver process: (d) a master that cannot fit the executor asked for, then (b) the whole graph."""
    root = tmp_path_factory.mktemp("pipeline")
    env = {
        "MDS_SPARK_MASTER": spark_cluster.master_url,
        "MDS_SPARK_CONF": json.dumps(cluster_conf),
        "MDS_WRITER_TASKS": "3",
        "MDS_SHARD_STORE": f"s3://{s3_server.new_bucket()}/shard-sets",
        "MDS_WAREHOUSE": str(root / "warehouse"),  # a shared path: one host
        "MDS_DATA_DIR": str(root / "data"),
        "MDS_CACHE_DIR": str(root / "cache"),
        "MDS_DATASETS": str(write_registry(root / "datasets.yaml", rows_per_day=60)),
        "MDS_PLAN_WORLD": "2x2x2",
        "MDS_PLAN_BATCH_SIZE": "4",
    }
    return run_driver(
        {"scenario": "pipeline", "cache": str(root / "read"), "no_room_timeout": 5.0}, env=env, timeout=400
    )


def test_whole_graph_on_the_cluster_with_shards_on_s3(pipeline_run, spark_cluster) -> None:
    report = pipeline_run
    assert report["success"] and report["smoke_passed"] and report["exactly_once"], report
    assert report["published"] == 1 and report["rows_streamed"] == 120 and report["ids"]
    assert report["partition_dirs"] == ["00000", "00001", "00002"], report  # MDS_WRITER_TASKS=3
    # Cluster settings: none of the small-machine defaults (they are for local masters).
    assert report["conf"]["spark.master"] == spark_cluster.master_url
    assert report["conf"]["spark.sql.shuffle.partitions"] == "200"
    assert report["conf"]["spark.ui.enabled"] == "false"  # set by cluster_conf here, not by the resource
    assert report["conf"]["spark.driver.memory"] == "1g"


def test_unreachable_master_is_one_clear_error_in_time() -> None:
    master = f"spark://127.0.0.1:{free_port()}"  # a port nobody listens on
    report = run_driver({"scenario": "resource", "master": master, "conf": {}, "timeout": 5.0})
    error = report["error"]
    assert error is not None and error["type"] == "ConfigurationError", report
    assert master in error["message"] and "MDS_SPARK_MASTER" in error["message"]
    assert "Connection refused" in error["message"]
    assert report["seconds"] < 5 and not report["context_left"]  # no JVM was even started


def test_master_without_room_for_an_executor_is_one_clear_error_in_time(pipeline_run) -> None:
    report = pipeline_run["no_room"]  # spark.executor.memory=4g; the workers offer 1g each
    error = report["error"]
    assert error is not None and error["type"] == "ConfigurationError", report
    assert "started no executor within 5 s" in error["message"] and "spark.executor.memory=4g" in error["message"]
    assert report["seconds"] < 40 and not report["context_left"]
