"""What is particular to Spark Connect: a session whose server is not there fails fast and says so, and
the job's tag and progress handler do not outlive the conversion.

Every converter test taking ``spark`` already runs on a Connect session too (``conftest.py``).
"""

from __future__ import annotations

import time

import pytest

from mds_core import dataframe_to_mds
from mds_core.convert.spark_connect import is_connect
from mds_core.errors import ConfigurationError
from testsupport.fault_proxy import free_port

connect = pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the 'connect' extra")


def test_a_dead_connect_server_is_one_clear_error_within_the_timeout(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MDS_SPARK_CONNECT_TIMEOUT", "2")
    url = f"sc://127.0.0.1:{free_port()}"  # a port nothing listens on
    session = connect.SparkSession(connection=url)  # not the process's default session: other tests use it
    try:
        frame = session.range(10)  # builds a plan; nothing is sent yet
        assert is_connect(frame) and is_connect(session)
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match=rf"no Spark Connect server answered at {url} within 2s"):
            dataframe_to_mds(frame, mds_kwargs={"out": str(tmp_path / "out")})
        assert time.monotonic() - started < 10  # not the client's minutes of retries
        assert not (tmp_path / "out").exists()
    finally:
        session.client.close()  # else its clean-up at exit would retry against the dead address


@pytest.mark.connect_too
def test_a_conversion_leaves_the_session_as_it_found_it(spark, tmp_path) -> None:
    """Classic: the job group is restored. Connect: the job's tag and the progress handler are removed."""
    dataframe_to_mds(spark.range(20, numPartitions=2), mds_kwargs={"out": str(tmp_path / "out"), "progress_bar": True})
    if is_connect(spark):
        assert spark.getTags() == set() and spark.client._progress_handlers == []
    else:
        assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
