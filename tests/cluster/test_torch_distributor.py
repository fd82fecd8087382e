"""TorchDistributor's distributed mode (``local_mode=False``) on the standalone cluster: one barrier task per
process, each a torchrun node on an executor, streaming a Volume (the Files API server of
testsupport/databricks_files.py) with the credentials the training function sets itself, as the executors'
environment has none. The same runs as tests/spark/test_torch_distributor.py's local mode: uninterrupted,
killed after step k, resumed on the same and on a different number of processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.clients.train_fn import read_trace, write_training_set
from tests.cluster.conftest import run_driver

pytestmark = pytest.mark.slow

ROWS, BATCH, STOP = 160, 8, 3


def test_a_killed_distributed_run_resumes_exactly(spark_cluster, cluster_conf, volumes_server, tmp_path: Path) -> None:
    remote = f"{volumes_server.new_root()}/digits"
    write_training_set(remote, ROWS)
    # mds_core installed in the executors' Python, as a cluster library is: torchrun's processes are new
    # interpreters, which do not see what spark.submit.pyFiles puts on the Python worker's own path.
    conf = {k: v for k, v in cluster_conf.items() if k != "spark.submit.pyFiles"}
    conf["spark.pyspark.python"] = sys.executable
    runs = [  # (name, processes, stop after step, checkpoint): a resumed run continues the killed run's checkpoint
        ("whole", 2, None, "whole.pt"),
        ("killed", 2, STOP, "a.pt"),
        ("resumed", 2, None, "a.pt"),
        ("killed-2", 2, STOP, "b.pt"),
        ("resumed-on-1", 1, None, "b.pt"),
    ]
    report = run_driver(
        {
            "scenario": "torch_distributor",
            "master": spark_cluster.master_url,
            "conf": conf,
            "host": volumes_server.endpoint,
            "token": volumes_server.token,
            "remote": remote,
            "scratch": str(tmp_path),
            "runs": runs,
        },
        timeout=600,
    )
    errors = report["errors"]
    assert errors["whole"] is None and errors["resumed"] is None and errors["resumed-on-1"] is None, errors
    assert errors["killed"] and errors["killed-2"]  # every rank killed itself after step k
    uninterrupted = read_trace(str(tmp_path / "whole" / "trace"), 2)
    assert sorted(i for batches in uninterrupted.values() for b in batches for i in b) == list(range(ROWS))
    for killed in ("killed", "killed-2"):
        assert read_trace(str(tmp_path / killed / "trace"), 2) == {r: b[:STOP] for r, b in uninterrupted.items()}
    assert read_trace(str(tmp_path / "resumed" / "trace"), 2) == {r: b[STOP:] for r, b in uninterrupted.items()}
    before = read_trace(str(tmp_path / "killed-2" / "trace"), 2)
    after = read_trace(str(tmp_path / "resumed-on-1" / "trace"), 1)
    seen = [i for batches in [*before.values(), *after.values()] for b in batches for i in b]
    assert sorted(seen) == list(range(ROWS))
