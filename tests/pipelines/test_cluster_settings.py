"""The Spark resource's settings by master, and its fast failures (no JVM is started here)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from dagster import ConfigurableResource, EnvVar
from pydantic import ValidationError

from mds_core.errors import ConfigurationError
from pipelines.cluster import check_master_reachable, defaults_for, standalone_addresses
from pipelines.resources import RESOURCES, SmokeTestSettings, SparkResource, TrainingWorldSettings, default_resources
from pipelines.settings import environment_variables
from testsupport.fault_proxy import free_port


def test_small_machine_defaults_only_for_local_masters() -> None:
    sizes = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    for master in ("local[*]", "local[2,2]", "local"):
        assert {name: defaults_for(master)[name] for name in sizes} == sizes
    for master in ("spark://h:7077", "yarn", "k8s://https://api:6443"):
        settings = defaults_for(master)
        assert not sizes.keys() & settings.keys()
        assert settings["spark.sql.session.timeZone"] == "UTC"  # semantics, not sizes: everywhere


def test_a_set_variable_binds_its_field_as_an_envvar_resolved_when_a_run_starts(monkeypatch) -> None:
    environ = {"MDS_SPARK_MASTER": "spark://h:7077", "MDS_WRITER_TASKS": "16", "MDS_PLAN_CONSUME_SECONDS": "0.002"}
    resources = default_resources(environ)
    spark = resources["spark"]
    # What the UI shows: the variables' names, never their values.
    assert spark.master == EnvVar("MDS_SPARK_MASTER") and spark.writer_tasks == EnvVar.int("MDS_WRITER_TASKS")
    assert spark.master_timeout == 30 and spark.remote == ""  # unset: the field's one default
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    spark = spark.process_config_and_initialize()  # as a run resolves it
    assert (spark.master, spark.writer_tasks, spark.master_timeout) == ("spark://h:7077", 16, 30)
    world = resources["training_world"].process_config_and_initialize()
    assert world.seconds_per_sample() == 0.002 and TrainingWorldSettings().seconds_per_sample() is None


EVERY_VARIABLE = {
    "MDS_SPARK_MASTER": "spark://h:7077",
    "MDS_SPARK_REMOTE": "sc://h:15002",
    "MDS_SPARK_CONF": '{"spark.executor.memory": "2g"}',
    "MDS_WRITER_TASKS": "3",
    "MDS_SPARK_MASTER_TIMEOUT": "12",
    "MDS_WAREHOUSE": "/w",
    "MDS_WAREHOUSE_STORAGE_OPTIONS": '{"anon": true}',
    "MDS_SHARD_STORE": "s3://b/sets",
    "MDS_STORAGE_OPTIONS": '{"anon": false}',
    "MDS_CACHE_DIR": "/c",
    "MDS_LANDING_DIR": "/l",
    "MDS_LANDING_STORAGE_OPTIONS": "{}",
    "MDS_SMOKE_SAMPLE_ROWS": "500",
    "MDS_SMOKE_SAMPLE_SECONDS": "5",
    "MDS_SMOKE_MIN_ROWS_PER_SECOND": "1000",
    "MDS_PLAN_WORLD": "2x8x4",
    "MDS_PLAN_BATCH_SIZE": "64",
    "MDS_PLAN_EPOCHS": "2",
    "MDS_PLAN_CACHE_LIMIT": "50gb",
    "MDS_PLAN_BANDWIDTH": "1gb",
    "MDS_PLAN_CONSUME_SECONDS": "0.01",
}


def test_every_variable_set_at_once_binds_and_resolves(monkeypatch) -> None:
    """Bound while the resources are built (constraints see Dagster's placeholder), resolved at run start."""
    resources = default_resources(EVERY_VARIABLE)
    for name, value in EVERY_VARIABLE.items():
        monkeypatch.setenv(name, value)
    resolved = {name: each.process_config_and_initialize() for name, each in resources.items()}
    assert resolved["training_world"].batch_size == 64 and resolved["training_world"].epochs == 2
    assert resolved["smoke_settings"].min_rows_per_second == 1000 and resolved["spark"].master_timeout == 12
    assert resolved["shard_store"].options() == {"anon": False} and resolved["spark"].remote == "sc://h:15002"
    assert resolved["catalog"].options() == {"anon": True}


def test_every_variable_names_one_field_and_its_description_says_so() -> None:
    seen: list[str] = []
    for resource in RESOURCES.values():
        for field, variable in environment_variables(resource).items():
            assert f"(${variable})" in (resource.model_fields[field].description or "")
            seen.append(variable)
    assert sorted(seen) == sorted(EVERY_VARIABLE) and len(seen) == len(set(seen))
    assert default_resources({})["spark"] == SparkResource()  # nothing set: every field at its default


def test_the_spark_resource_merges_run_tuning_with_the_deployments_settings(monkeypatch) -> None:
    monkeypatch.setenv("MDS_SPARK_CONF", '{"spark.x": "1"}')
    spark = SparkResource(spark_config={"spark.executor.memory": "2g"}, spark_config_json=EnvVar("MDS_SPARK_CONF"))
    # A plain Dagster resource: no dagster-pyspark base (docs/pipelines.md says why).
    assert SparkResource.__bases__ == (ConfigurableResource,)
    assert spark.settings() == {"spark.executor.memory": "2g", "spark.x": "1"}


def test_a_bad_consume_seconds_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="consume_seconds must be a number of seconds, got 'fast'"):
        TrainingWorldSettings(consume_seconds="fast")


def test_a_bad_smoke_cache_limit_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="cache_limit: Unsupported value/suffix 'lots'"):
        SmokeTestSettings(cache_limit="lots")
    assert SmokeTestSettings(cache_limit="2gb").cache_limit == "2gb" and SmokeTestSettings().cache_limit == ""


def test_standalone_addresses() -> None:
    assert standalone_addresses("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert standalone_addresses("yarn") == []
    with pytest.raises(ConfigurationError, match="is not HOST:PORT"):
        standalone_addresses("spark://a")


def test_unreachable_master_fails_within_the_timeout_and_one_live_master_is_enough(monkeypatch) -> None:
    dead = free_port()  # nothing listens there
    attempts: list[float] = []  # the timeout of each connection tried: one attempt, bounded by the timeout
    connect = socket.create_connection

    def recorded(*args: Any, **kwargs: Any) -> socket.socket:
        attempts.append(kwargs["timeout"])
        return connect(*args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recorded)
    with pytest.raises(
        ConfigurationError,
        match=rf"cannot reach the Spark master spark://127.0.0.1:{dead} .*"
        r"Connection refused.*MDS_SPARK_MASTER",
    ):
        check_master_reachable(f"spark://127.0.0.1:{dead}", 2.0)
    assert len(attempts) == 1 and 0 < attempts[0] <= 2.0
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        check_master_reachable(f"spark://127.0.0.1:{dead},127.0.0.1:{live.getsockname()[1]}", 2.0)
