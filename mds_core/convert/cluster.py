"""What ``dataframe_to_mds`` checks and adjusts before it writes on a cluster (docs/cluster.md).

* **A local ``out`` must be one directory for the driver and every executor.** The executors write the
  staging directories, the driver renames them into place, so a path that exists only on the driver's
  disk (its ``/tmp``, its home) would leave the shards on the executors' disks and nothing on the
  driver. Whether the path is shared cannot be told from its name or from the master URL (a one-host
  cluster shares ``/tmp``, a cluster with an NFS mount shares ``/mnt/nfs``), so it is measured: the
  driver writes a probe file with a random token under ``out``, one small Spark job with a task per
  core of the cluster reads it back on the executors, and any executor that does not see the token
  fails the conversion with a ``ConfigurationError`` before anything is written. Local masters
  (``local[...]``, where the executors are the driver's own process or host) skip the probe; Spark
  Connect sessions always run it (the client that commits may not be the server's host).
* **The number of writer tasks** (``mds_kwargs["num_tasks"]``): the DataFrame is repartitioned to that
  many partitions, each written by one task into its own sub-directory; ``"auto"`` means the cluster's
  default parallelism (``default_parallelism``). Without it the DataFrame's own partitions are kept.

Only public DataFrame and ``spark.conf`` calls are used, so this works with classic and Connect sessions.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any

from mds_core.convert.route import Route
from mds_core.convert.spark_connect import is_connect
from mds_core.convert.staging import STAGING_DIR
from mds_core.errors import ConfigurationError, ConversionError, MissingDependencyError

_PROBE_DDL = "host string, pid long, cwd string, seen boolean"


def prepare(dataframe: Any, kwargs: dict[str, Any], route: Route) -> tuple[Any, dict[str, Any]]:
    """The DataFrame to write and the writer arguments without the driver-only ``num_tasks``.

    Raises ``ConfigurationError`` when ``out`` is a local path that some executor cannot see.
    """
    kwargs = dict(kwargs)
    num_tasks = kwargs.pop("num_tasks", None)
    spark = dataframe.sparkSession
    if route.shared_local_out:
        check_out_is_shared(spark, route.shared_local_out, connect=route.connect)
    if num_tasks is not None:
        dataframe = dataframe.repartition(_num_tasks(spark, num_tasks, route.connect))
    return dataframe, kwargs


def _num_tasks(spark: Any, value: Any, connect: bool) -> int:
    if value == "auto":
        return default_parallelism(spark, connect=connect)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConversionError(f"mds_kwargs['num_tasks'] must be a positive int or 'auto', got {value!r}")
    return value


def master(spark: Any) -> str:
    """The session's ``spark.master`` setting, or ``""`` when it cannot be read (a Connect session)."""
    try:
        return str(spark.conf.get("spark.master", "") or "")
    except Exception:
        return ""


def default_parallelism(spark: Any, *, connect: bool | None = None) -> int:
    """``spark.default.parallelism`` if set, else the cluster's cores as Spark counts them.

    Classic sessions ask the SparkContext (the executors' total cores on a cluster); Connect sessions,
    which have none, count the partitions ``spark.range`` gets by default (the same number). ``connect``
    says which kind ``spark`` is, when the caller has decided it already; else it is asked here.
    """
    try:
        configured = spark.conf.get("spark.default.parallelism", None)
    except Exception:
        configured = None
    if configured:
        return int(configured)
    if not (is_connect(spark) if connect is None else connect):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql.connect import functions as F

    return int(spark.range(0, 1 << 20).select(F.spark_partition_id().alias("p")).distinct().count())


def needs_probe(spark: Any, connect: bool) -> bool:
    """Whether executors may have another view of the driver's files.

    A Connect session (its client may not be the server's host) or anything but a local master.
    """
    return connect or not master(spark).startswith("local")


def check_out_is_shared(spark: Any, path: str, *, connect: bool) -> None:
    """Fail fast, writing nothing, when an executor cannot see the local directory ``path``."""
    if not needs_probe(spark, connect):
        return
    created = not os.path.exists(path)
    probe_dir = os.path.join(path, STAGING_DIR)
    had_probe_dir = os.path.isdir(probe_dir)
    token = uuid.uuid4().hex
    probe = os.path.join(probe_dir, f"probe-{token}")
    try:
        os.makedirs(probe_dir, exist_ok=True)
        with open(probe, "w") as handle:
            handle.write(token)
        tasks = max(2, default_parallelism(spark, connect=connect))
        rows = spark.range(0, tasks, 1, tasks).mapInArrow(functools.partial(_look, probe, token), _PROBE_DDL).collect()
    except Exception as err:
        if "No module named 'mds_core'" in str(err):
            raise MissingDependencyError(
                "the Spark executors cannot import mds_core: install mds-pipelines (with the extra for your "
                "storage) in the executors' Python, or ship it with spark.submit.pyFiles (docs/cluster.md)"
            ) from err
        raise
    finally:
        _remove_probe(probe, probe_dir, had_probe_dir, path, created)
    blind = sorted({f"{row['host']} (cwd {row['cwd']})" for row in rows if not row["seen"]})
    if blind:
        raise ConfigurationError(
            f"out={path!r} is a local path that {len(blind)} Spark executor(s) cannot see: "
            f"{', '.join(blind[:4])}. The executors write the shards and the driver commits them, so a local "
            "out must be one shared directory mounted at the same path on the driver and every executor; "
            "otherwise write to a URL (s3://, gs://, az://, ...). Nothing was written."
        )


def _look(probe: str, token: str, batches: Iterator[Any]) -> Iterator[Any]:
    """The probe task: does this executor see the driver's probe file, with the driver's token?"""
    import pyarrow as pa

    for _ in batches:
        pass
    try:
        with open(probe) as handle:
            seen = handle.read() == token
    except OSError:
        seen = False
    yield pa.RecordBatch.from_pylist(
        [{"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd(), "seen": seen}],
        schema=pa.schema([("host", pa.string()), ("pid", pa.int64()), ("cwd", pa.string()), ("seen", pa.bool_())]),
    )


def _remove_probe(probe: str, probe_dir: str, had_probe_dir: bool, path: str, created: bool) -> None:
    with contextlib.suppress(OSError):
        os.unlink(probe)
    for directory, keep in ((probe_dir, had_probe_dir), (path, not created)):
        if not keep:
            with contextlib.suppress(OSError):  # not empty: someone else's files
                os.rmdir(directory)
