"""The Spark resource's settings by master, and its fast failures (no JVM is started here)."""

from __future__ import annotations

import socket
import time

import pytest

from mds_core.errors import ConfigurationError
from pipelines.cluster import check_master_reachable, defaults_for, standalone_addresses
from pipelines.resources import resources_from_env


def test_small_machine_defaults_only_for_local_masters() -> None:
    for master in ("local[*]", "local[2,2]", "local"):
        assert defaults_for(master)["spark.sql.shuffle.partitions"] == "4"
        assert (
            defaults_for(master)["spark.ui.enabled"] == "false" and defaults_for(master)["spark.driver.memory"] == "2g"
        )
    for master in ("spark://h:7077", "yarn", "k8s://https://api:6443"):
        settings = defaults_for(master)
        assert not {"spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.driver.memory"} & set(settings)
        assert settings["spark.sql.session.timeZone"] == "UTC"  # semantics, not sizes: everywhere


def test_settings_from_the_environment() -> None:
    spark = resources_from_env(
        {"MDS_SPARK_MASTER": "spark://h:7077", "MDS_WRITER_TASKS": "16", "MDS_SPARK_MASTER_TIMEOUT": "12.5"}
    )["spark"]
    assert (spark.master, spark.writer_tasks, spark.master_timeout) == ("spark://h:7077", 16, 12.5)
    spark = resources_from_env({})["spark"]
    assert (spark.writer_tasks, spark.master_timeout) == (0, 30.0)


def test_standalone_addresses() -> None:
    assert standalone_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert standalone_addresses("yarn") == []
    with pytest.raises(ConfigurationError, match="is not HOST:PORT"):
        standalone_addresses("spark://a")


def test_unreachable_master_fails_within_the_timeout_and_one_live_master_is_enough() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(
        ConfigurationError,
        match=rf"cannot reach the Spark master spark://127.0.0.1:{dead} .*"
        r"Connection refused.*MDS_SPARK_MASTER",
    ):
        check_master_reachable(f"spark://127.0.0.1:{dead}", 2.0)
    assert time.perf_counter() - started < 2.0
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        check_master_reachable(f"spark://127.0.0.1:{dead},127.0.0.1:{live.getsockname()[1]}", 2.0)
