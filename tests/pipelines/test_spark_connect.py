"""The Spark assets through dagster.materialize() on a Spark Connect session (MDS_SPARK_REMOTE).

The server is a real Spark Connect server from pyspark's distribution (``testsupport/spark_connect.py``); the
assets and ``dataframe_to_mds`` run unchanged on it.
"""

from __future__ import annotations

import os
import time

import pytest
from dagster import EnvVar, materialize

from mds_core.errors import ConfigurationError
from pipelines.assets.raw import build_raw_table
from pipelines.assets.shards import build_shard_set
from pipelines.assets.validated import COUNTS_CHECK, build_validated_table
from pipelines.resources import SparkResource, default_resources
from tests.pipelines.conftest import check, materialization, meta, stream_ids
from testsupport.fault_proxy import free_port

pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the 'connect' extra")
DAY = "2026-01-01"


@pytest.mark.slow  # a whole day's run over Connect (23 s); the converter's Connect paths run in make test (connect_too)
def test_raw_validated_and_shards_on_spark_connect(resources, spec, spark_connect_server, monkeypatch, tmp_path):
    # pyspark.sql.functions follows this process-wide flag (the classic tests share the process): undone after.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    monkeypatch.setenv("MDS_SPARK_REMOTE", spark_connect_server.url)
    monkeypatch.delenv("MDS_SPARK_CONF")  # the classic session's JVM options (conftest.py) are no Connect setting
    configured = default_resources(os.environ)["spark"]
    assert configured.remote == EnvVar("MDS_SPARK_REMOTE")  # a secret: resolved when a run starts
    spark = configured.process_config_and_initialize()  # resolved as a run resolves it
    assert spark.remote == spark_connect_server.url
    session = spark.session()
    assert type(session).__module__ == "pyspark.sql.connect.session" and spark.session() is session  # reused
    assert session.conf.get("spark.sql.sources.partitionColumnTypeInference.enabled") == "false"  # `day` a string
    assets = [build_raw_table(spec), build_validated_table(spec), build_shard_set(spec)]
    result = materialize(assets, partition_key=DAY, resources={**resources, "spark": configured})
    assert result.success
    assert check(result, COUNTS_CHECK).passed
    shards = meta(materialization(result, "shard_set"))
    assert shards["rows"] == shards["rows_added"] == 60 and shards["version"] == 1
    assert stream_ids(resources, 1, tmp_path / "cache") == list(range(60))


def test_a_dead_spark_connect_address_fails_naming_it(monkeypatch) -> None:
    monkeypatch.setenv("MDS_SPARK_CONNECT_TIMEOUT", "2")
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    message = rf"no Spark Connect server answered at {url} within 2s.*MDS_SPARK_REMOTE"
    with pytest.raises(ConfigurationError, match=message):
        SparkResource(remote=url).session()


@pytest.mark.timing
def test_a_dead_spark_connect_address_fails_fast(monkeypatch):
    started = time.monotonic()
    test_a_dead_spark_connect_address_fails_naming_it(monkeypatch)
    assert time.monotonic() - started < 10  # the 2 s wait, not pyspark's minutes of retries
