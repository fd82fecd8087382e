"""Spark Connect support for the converter and the pipelines.

A Spark Connect session (``SparkSession.builder.remote("sc://host:port")``, Databricks Connect) has no
``sparkContext``, no RDDs and no JVM in the client process. ``dataframe_to_mds`` runs unchanged on it:
the conversion is a ``mapInArrow`` either way; only the driver-side scaffolding (cancellation, progress)
differs, and is chosen by the kind of DataFrame (``is_connect``), never by a process-wide setting.

Nothing here imports ``pyspark.sql.connect`` unless a Connect object is in hand: its gRPC dependencies
are the ``connect`` extra.
"""

from __future__ import annotations

import os
from typing import Any

from mds_core.errors import ConfigurationError, MissingDependencyError

# How long a Connect server may take to accept the connection before we give up (seconds).
TIMEOUT_ENV = "MDS_SPARK_CONNECT_TIMEOUT"
DEFAULT_TIMEOUT = 10.0


def is_connect(obj: Any) -> bool:
    """True for a Spark Connect ``SparkSession``, ``DataFrame`` or ``Column``."""
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def is_spark_dataframe(obj: Any) -> bool:
    """True for a classic or a Spark Connect DataFrame, of pyspark 3.5 (Databricks Connect up to 16.x) or 4.x.

    In pyspark 3.5 a Connect DataFrame is not a ``pyspark.sql.DataFrame``: the two class trees only
    share a parent from 4.0 on. Connect's class is imported only for an object of its module, so a
    classic session does not need the ``connect`` extra.
    """
    from pyspark.sql import DataFrame

    if isinstance(obj, DataFrame):
        return True
    if not is_connect(obj):
        return False
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

    return isinstance(obj, ConnectDataFrame)


def functions_for(dataframe: Any) -> Any:
    """``pyspark.sql.functions`` for the DataFrame's kind (see ``functions_module``)."""
    return functions_module(connect=is_connect(dataframe))


def functions_module(*, connect: bool) -> Any:
    """``pyspark.sql.functions`` for Spark Connect (``connect``) or classic sessions.

    ``pyspark.sql.functions`` picks classic or Connect from a process-wide flag that pyspark sets when
    a Connect session is created; a process holding both kinds must build each one's columns itself.
    """
    if connect:
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions


def timeout_seconds(timeout: float | None = None) -> float:
    """``timeout`` if given, else ``$MDS_SPARK_CONNECT_TIMEOUT``, else the default."""
    if timeout is not None:
        return timeout
    value = os.environ.get(TIMEOUT_ENV, "")
    try:
        return float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        raise ConfigurationError(f"{TIMEOUT_ENV}={value!r} is not a number of seconds") from None


def address(session: Any) -> str:
    """``sc://host:port`` of a Connect session, without the URL's parameters (a token stays secret)."""
    builder = getattr(getattr(session, "client", None), "_builder", None)
    endpoint = getattr(builder, "endpoint", None)
    return f"sc://{endpoint}" if endpoint else "the Spark Connect server"


def check_reachable(session: Any, timeout: float | None = None) -> None:
    """Raise ``ConfigurationError`` unless the session's Connect server accepts a connection in time.

    Without this, the first call on a session whose server is down retries for minutes (the Connect
    client's default retry policy) before it fails.
    """
    if getattr(session, "is_stopped", False):
        return  # a stopped session: pyspark says so itself on the first call, at once
    channel = getattr(session.client, "_channel", None)
    if channel is not None:  # else another client implementation: nothing to check cheaply
        _wait_ready(channel, address(session), timeout)


def connect_session(url: str, options: dict[str, str] | None = None, timeout: float | None = None) -> Any:
    """A Spark Connect session on ``url`` (``sc://host:port``), checked to answer within ``timeout``.

    Reuses the process's Connect session when it is for the same server. Built with the Connect
    builder itself, so it also works in a process that already runs a classic session. Static
    settings (``spark.driver.memory``, ...) are the server's: the Connect builder skips them.
    """
    try:
        from pyspark.sql.connect.client import DefaultChannelBuilder
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as err:
        raise MissingDependencyError(
            "a Spark Connect session needs pyspark's Connect client: pip install 'mds-pipelines[connect]'"
        ) from err
    if not url.startswith("sc://"):
        raise ConfigurationError(f"Spark Connect URL {url.split(';')[0]!r} must look like sc://host:port")
    channels = DefaultChannelBuilder(url)
    # Before any session exists: its first call would retry for minutes if nothing listens, and a
    # session that never answers would still try to clean up at exit.
    channel = channels.toChannel()
    try:
        _wait_ready(channel, f"sc://{channels.endpoint}", timeout)
    finally:
        channel.close()
    # Like pyspark's own builder: pyspark.sql.functions now builds Connect columns in this process.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    builder = ConnectSession.builder.remote(url)
    for key, value in (options or {}).items():
        builder = builder.config(key, value)
    try:
        current = ConnectSession.active()  # this thread's session, else the process's default one
    except Exception:
        current = None
    if current is not None and address(current) == f"sc://{channels.endpoint}":
        return builder.getOrCreate()  # the same server: the session there, with the options applied
    return builder.create()


def _wait_ready(channel: Any, where: str, timeout: float | None) -> None:
    import grpc

    seconds = timeout_seconds(timeout)
    try:
        grpc.channel_ready_future(channel).result(timeout=seconds)
    except grpc.FutureTimeoutError:
        raise ConfigurationError(
            f"no Spark Connect server answered at {where} within {seconds:g}s: start one there "
            f"(pyspark's sbin/start-connect-server.sh, or a Databricks cluster) or fix the address given to "
            f"SparkSession.builder.remote(...) (MDS_SPARK_REMOTE for the pipelines); {TIMEOUT_ENV} sets how "
            f"long to wait"
        ) from None
