"""Spark settings that depend on where Spark runs, and the checks that make a bad master URL fail fast.

* Small-machine defaults (4 shuffle partitions, no UI, a 2 GB driver) suit ``local[...]`` masters
  only; on a cluster Spark's own defaults (or the deployment's ``MDS_SPARK_CONF``) apply.
* A ``spark://`` master that does not answer would otherwise cost Spark's registration retries
  (3 x 20 s) and then an error about "All masters are unresponsive"; here it is one
  ``ConfigurationError`` naming the URL and the setting, after ``MDS_SPARK_MASTER_TIMEOUT`` seconds at most.
  A master that answers but gives the application no executor (no workers, or none with the cores and
  memory asked for) fails the same way instead of leaving every job waiting.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mds_core.errors import ConfigurationError
from mds_core.storage.urls import redact

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Only for local masters: few shuffle partitions, no UI port to collide on, a driver that fits a laptop.
LOCAL_DEFAULTS = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", "spark.driver.memory": "2g"}
# Everywhere: the pipelines' semantics, not sizes.
COMMON_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Keep the `day` partition column a 'YYYY-MM-DD' string, not a date.
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}
DEFAULT_MASTER_TIMEOUT = 30


LOG_SETTINGS = Path(__file__).resolve().with_name("log4j2.properties")


def defaults_for(master: str) -> dict[str, str]:
    """The Spark settings every session gets on ``master``, a local one's included."""
    return {**COMMON_DEFAULTS, **(LOCAL_DEFAULTS if is_local(master) else {})}


def quiet_local_jvm(master: str, conf: dict[str, str]) -> dict[str, str]:
    """For local masters: no warnings a user cannot act on in every run's log.

    Spark warns that the host name resolves to a loopback address (true of most laptops and CI
    machines, and harmless for a local master) unless ``SPARK_LOCAL_IP`` says which address to use,
    and Hadoop warns that its native library is missing. Both go; the user's own log settings
    (``spark.driver.extraJavaOptions``) win over ours.
    """
    if not is_local(master):
        return {}
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "spark.driver.extraJavaOptions" in conf:
        return {}
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_SETTINGS}"}


def is_local(master: str) -> bool:
    """Whether ``master`` runs Spark in this process's JVM."""
    return master.startswith("local")


def standalone_addresses(master: str) -> list[tuple[str, int]]:
    """``spark://h1:7077,h2:7077`` -> [(h1, 7077), (h2, 7077)]; [] for other masters."""
    if not master.startswith("spark://"):
        return []
    addresses = []
    for part in master[len("spark://") :].split(","):
        host, _, port = part.strip().rpartition(":")
        try:
            addresses.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ConfigurationError(
                f"MDS_SPARK_MASTER={master!r}: {part!r} is not HOST:PORT (e.g. spark://spark-master:7077)"
            ) from None
    return addresses


def check_master_reachable(master: str, timeout: float) -> None:
    """Raise ``ConfigurationError`` unless one of a ``spark://`` master's addresses accepts a connection."""
    addresses = standalone_addresses(master)
    if not addresses:
        return
    deadline = time.monotonic() + timeout
    problems = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic())):
                return
        except OSError as err:
            problems.append(f"{host}:{port}: {err.strerror or err}")
    raise ConfigurationError(
        f"cannot reach the Spark master {redact(master)} ({'; '.join(problems)}) within {timeout:g} s: start the master "
        "there (sbin/start-master.sh), or set MDS_SPARK_MASTER to its URL (spark://HOST:PORT, port 7077 by "
        "default) or to local[*]; MDS_SPARK_MASTER_TIMEOUT sets how long to wait"
    )


def apply_python(conf: dict[str, str]) -> None:
    """``spark.pyspark.python`` in the settings: the executors' Python, as spark-submit would take it.

    A session built from Python (not through spark-submit) reads only ``PYSPARK_PYTHON`` for the Python
    its executors run, so the setting is copied there.
    """
    python = conf.get("spark.pyspark.python")
    if python:
        os.environ["PYSPARK_PYTHON"] = python


def wait_for_executors(session: SparkSession, master: str, timeout: float) -> None:
    """On a fresh classic session with a cluster master: wait until at least one executor has registered."""
    if is_local(master) or not master.startswith("spark://"):
        return
    context = session.sparkContext
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if context._jsc.sc().getExecutorMemoryStatus().size() > 1:  # the driver counts as one
            return
        time.sleep(0.2)
    conf = context.getConf()
    asked = (
        f"spark.executor.cores={conf.get('spark.executor.cores', 'all of a worker')}, "
        f"spark.executor.memory={conf.get('spark.executor.memory', '1g')}"
    )
    session.stop()
    raise ConfigurationError(
        f"the Spark master {redact(master)} accepted the application but started no executor within {timeout:g} s: "
        f"check on the master's web UI that workers are registered and have free cores and memory for "
        f"{asked} (MDS_SPARK_CONF), and that the workers can reach this driver; MDS_SPARK_MASTER_TIMEOUT sets "
        "how long to wait"
    )


def writer_partitions(frame: DataFrame, tasks: int, *columns: str, connect: bool | None = None) -> DataFrame:
    """``frame`` sorted by ``columns`` in ``tasks`` range partitions (0: the cluster's default parallelism).

    Unlike ``orderBy``, whose partition count is ``spark.sql.shuffle.partitions`` (then coalesced by
    adaptive execution), this gives the writer exactly ``tasks`` tasks, each holding one range of the order.
    ``connect``: whether ``frame`` is a Spark Connect DataFrame, when the caller knows (else it is asked).
    """
    from mds_core.convert.cluster import default_parallelism

    count = tasks or default_parallelism(frame.sparkSession, connect=connect)
    return frame.repartitionByRange(count, *columns).sortWithinPartitions(*columns)


def write_day(frame: DataFrame, day: str, tasks: int, mds_kwargs: dict[str, Any]) -> Any:
    """One day's rows, sorted by id in ``tasks`` range partitions, as one partition of a shard-set version.

    The conversion step of the ``shards`` assets, without Dagster: the Databricks Connect client matrix
    runs it in the clients' own environments (tests/clients/convert_client.py).
    """
    from mds_core.convert.spark import dataframe_to_mds
    from mds_core.convert.spark_connect import functions_module, is_connect

    connect = is_connect(frame)  # asked once here; dataframe_to_mds asks once at its own door
    of_day = functions_module(connect=connect).col("day") == day
    day_frame = writer_partitions(frame.where(of_day), tasks, "id", connect=connect)
    return dataframe_to_mds(day_frame, merge_index=True, mds_kwargs=mds_kwargs)
