"""What a run's config may set in the resources' dictionaries, and what only the deployment sets.

Dagster lets run config (the Launchpad's ``resources:`` section, the GraphQL API behind it) replace every
resource field, the EnvVar-bound ones too, so whoever can launch a run chooses those values. The settings
that could send the deployment's credentials to another host, or run code on the run's host, are
therefore checked where the resources use them, before any store or Spark session is opened:

* ``ShardStore.storage_options`` (fsspec options) refuses every key, at any depth, that can redirect
  requests or carry or choose credentials: names in ``REFUSED_OPTION_NAMES``, or containing one of
  ``REFUSED_OPTION_FRAGMENTS``;
* ``SparkResource.spark_config`` takes only the tuning settings of ``RUN_CONFIG_SPARK_SETTINGS``. Spark
  has class names, jars, JVM options, Python executables and Hadoop file systems in settings all over its
  namespaces, so a deny-list would always miss one; an allow-list cannot;
* the deployment-only fields (``spark_config_json``, the ``storage_options_json`` fields) are honoured
  only with their own variable's value (``pipelines.settings.deployment_value``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mds_core.errors import ConfigurationError

# fsspec option names (s3fs, gcsfs, adlfs, the Databricks SDK's Config, HTTP, FTP/SFTP...) refused as
# they are, compared without case or separators ("endpointUrl" is "endpoint_url").
REFUSED_OPTION_NAMES = frozenset({"client_id", "config_file", "user", "username"})
# ... and refused when the name contains one of these.
REFUSED_OPTION_FRAGMENTS = frozenset(
    {
        # where the requests go
        "endpoint",
        "host",
        "url",
        "proxy",
        "proxies",
        # whether the other end is checked
        "ssl",
        "tls",
        "verify",
        "cert",
        # which credentials go with them
        "token",
        "profile",
        "key",
        "secret",
        "password",
        "passwd",
        "connection_string",
        "sas",
        "credential",
        "session",
        "auth",
        "account",
        "tenant",
        "header",
    }
)

# Sizes, parallelism and timeouts: nothing that names a class, a file, a jar, a host, a command, JVM or
# Python options or an environment variable, nor opens a port (the Spark UI has no authentication). Anything else comes from the deployment's $MDS_SPARK_CONF.
RUN_CONFIG_SPARK_SETTINGS = frozenset(
    {
        "spark.default.parallelism",
        "spark.sql.shuffle.partitions",
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.files.openCostInBytes",
        "spark.sql.files.minPartitionNum",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.broadcastTimeout",
        "spark.sql.adaptive.enabled",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes",
        "spark.sql.adaptive.autoBroadcastJoinThreshold",
        "spark.sql.adaptive.coalescePartitions.enabled",
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum",
        "spark.sql.adaptive.coalescePartitions.minPartitionSize",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst",
        "spark.sql.adaptive.localShuffleReader.enabled",
        "spark.sql.adaptive.skewJoin.enabled",
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor",
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
        "spark.sql.execution.arrow.maxRecordsPerBatch",
        "spark.sql.session.timeZone",
        "spark.executor.memory",
        "spark.executor.memoryOverhead",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.cores.max",
        "spark.driver.memory",
        "spark.driver.cores",
        "spark.driver.maxResultSize",
        "spark.task.cpus",
        "spark.task.maxFailures",
        "spark.memory.fraction",
        "spark.memory.storageFraction",
        "spark.python.worker.memory",
        "spark.python.worker.reuse",
        "spark.network.timeout",
        "spark.locality.wait",
        "spark.speculation",
        "spark.ui.showConsoleProgress",
    }
)


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_NAMES = frozenset(_plain(name) for name in REFUSED_OPTION_NAMES)
_FRAGMENTS = frozenset(_plain(fragment) for fragment in REFUSED_OPTION_FRAGMENTS)


def refused_option(name: str) -> bool:
    """Whether an fsspec option of this name can redirect requests or carry or choose credentials."""
    plain = _plain(name)
    return plain in _NAMES or any(fragment in plain for fragment in _FRAGMENTS)


def refused_options(options: Mapping[str, Any], where: str = "") -> list[str]:
    """The paths (``client_kwargs.endpoint_url``, ``s3[0].key``) of every refused key in ``options``."""
    found: list[str] = []
    for key, value in options.items():
        path = f"{where}.{key}" if where else str(key)
        found += [path] if refused_option(str(key)) else _refused_inside(value, path)
    return found


def _refused_inside(value: Any, path: str) -> list[str]:
    if isinstance(value, Mapping):
        return refused_options(value, path)
    if isinstance(value, list | tuple):
        return [found for i, item in enumerate(value) for found in _refused_inside(item, f"{path}[{i}]")]
    return []


def check_storage_options(options: Mapping[str, Any], field: str, variable: str) -> None:
    """Raise ``ConfigurationError`` naming every key of ``options`` (run-configurable) that only ``$variable`` may set."""
    refused = refused_options(options)
    if refused:
        raise ConfigurationError(
            f"{field}: {', '.join(map(repr, refused))} may not be set in run config: endpoint, proxy, TLS and "
            "credential options would send this deployment's requests, and the credentials they carry, "
            f"elsewhere. Only the deployment's ${variable} sets them"
        )


def check_spark_config(settings: Mapping[str, Any], field: str, variable: str) -> None:
    """Raise ``ConfigurationError`` naming every key of ``settings`` (run-configurable) outside the allow-list."""
    refused = [key for key in settings if key not in RUN_CONFIG_SPARK_SETTINGS]
    if refused:
        raise ConfigurationError(
            f"{field}: {', '.join(map(repr, refused))} may not be set in run config: it takes only the tuning "
            "settings docs/pipelines.md lists (shuffle partitions, memory, cores, adaptive execution...). "
            "Settings that load code, set JVM or Python options, environment variables or other hosts belong "
            f"in the deployment's ${variable}"
        )
