"""Resources: the Spark session, the local table catalog, the shard store and the landing folder.

Every setting has one default, in its field, that works offline on a fresh clone. A field may name an
environment variable (``MDS_SPARK_MASTER``, ``MDS_SHARD_STORE``, ...: ``env_field``), bound to it when
the code location loads (``pipelines.settings``). Dagster config (the Launchpad's ``resources:``
section, or resource objects passed to ``Definitions``/``materialize``) sets any field too, so whoever
launches a run chooses them: the dictionaries a run may set are checked (``pipelines.run_config``), and
the deployment-only fields are honoured only with their variable's own value
(``pipelines.settings.deployment_value``), before any session or store is opened. Nothing is read from
the environment at import.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from dagster import ConfigurableResource, EnvVar
from pydantic import Field, field_validator

from mds_core.errors import SizeError, StoreFileNotFoundError
from mds_core.order.world import DEFAULT_WORLD
from mds_core.sizes import bytes_to_int
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.urls import join, redact
from mds_core.streaming.version_sample import (
    DEFAULT_CHECK_BATCH_SIZE,
    DEFAULT_CHECK_WORKERS,
    DEFAULT_SAMPLE_ROWS,
    DEFAULT_SAMPLE_SECONDS,
)
from pipelines import cluster, jvm
from pipelines.paths import data_dir
from pipelines.run_config import check_spark_config, check_storage_options
from pipelines.settings import bound_to_environment, deployment_json, env_field, environment_variables, resolved

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from mds_core.versions import ShardSet

# ConfigurableResource is generic in the value its create_resource makes (each resource here is its
# own). The bases stay the bare class at runtime: subscripting a pydantic model makes a new class.
if TYPE_CHECKING:
    Resource: TypeAlias = ConfigurableResource[Any]
else:
    Resource = ConfigurableResource


class SparkResource(Resource):
    """A Spark session.

    ``local[*]`` by default, any master URL (``spark://host:7077``, ``yarn``), or a Spark Connect server (``remote``).

    A plain ``ConfigurableResource``, not dagster-pyspark's ``LazyPySparkResource``: the session is built
    here (docs/pipelines.md says why): a local JVM started with its stderr filtered, a ``spark://`` master
    checked to answer, a Connect server checked to answer. Sessions are per process (the JVM is), so the
    first ``session()`` decides the settings; runs use the in-process executor so a run starts one JVM.
    """

    spark_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Spark tuning settings a run may set (shuffle partitions, memory, cores, adaptive execution; "
        "pipelines.run_config.RUN_CONFIG_SPARK_SETTINGS); anything else goes in $MDS_SPARK_CONF.",
    )
    master: str = env_field("local[*]", "MDS_SPARK_MASTER", "Spark master URL")
    remote: str = env_field(
        "", "MDS_SPARK_REMOTE", "Spark Connect URL, sc://host:port; when set, the session is a Connect client"
    )
    app_name: str = "mds-pipelines"
    spark_config_json: str = env_field(
        "",
        "MDS_SPARK_CONF",
        "Deployment only: any Spark settings as a JSON object (JVM options, jars, executors' Python and "
        "environment, connectors); settings whose names hold secrets are kept off the JVM's command line",
        deployment_only=True,
    )
    writer_tasks: int = env_field(
        0, "MDS_WRITER_TASKS", "Tasks that write a shard set (one folder each); 0: the cluster's default parallelism"
    )
    master_timeout: int = env_field(
        cluster.DEFAULT_MASTER_TIMEOUT,
        "MDS_SPARK_MASTER_TIMEOUT",
        "Seconds to reach a spark:// master and get a first executor",
    )

    def settings(self) -> dict[str, str]:
        """``spark_config`` (tuning settings only) plus ``spark_config_json`` (the deployment's).

        Every extra Spark setting, checked before any session is built.
        """
        variable = environment_variables(SparkResource)["spark_config_json"]
        check_spark_config(self.spark_config, "SparkResource.spark_config", variable)
        extra = deployment_json(self, "spark_config_json")
        return {**{k: str(v) for k, v in self.spark_config.items()}, **extra}

    def session(self) -> SparkSession:
        """The process's Spark session, built and checked on first use."""
        conf, remote = self.settings(), resolved(self.remote)
        if remote:  # Spark Connect: checked to answer within $MDS_SPARK_CONNECT_TIMEOUT seconds
            from mds_core.convert.spark_connect import connect_session

            # The pipelines' session settings (spark.sql.*); the others are the server's to choose.
            sql = {k: v for k, v in cluster.COMMON_DEFAULTS.items() if k.startswith("spark.sql.")}
            # cast: a Connect session is not a pyspark.sql.SparkSession but has its API; pyspark's own
            # builder types the Connect sessions it makes as one the same way.
            return cast("SparkSession", connect_session(remote, {**sql, **conf}))
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(self.master).appName(self.app_name)
        # Small-machine defaults (4 shuffle partitions, no UI, 2g driver) for local masters only.
        defaults = {**cluster.defaults_for(self.master), **cluster.quiet_local_jvm(self.master, conf)}
        if cluster.is_local(self.master):
            # Local Python workers must run this interpreter (its packages), not whatever `python3` is
            # on PATH; pyspark reads only the environment variable for that.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings = {**defaults, **conf}
        for key, value in settings.items():
            builder = builder.config(key, value)
        fresh = SparkContext._active_spark_context is None
        if fresh:
            cluster.check_master_reachable(self.master, self.master_timeout)
            cluster.apply_python(conf)
            # The JVM's stderr without the one line nobody can act on; the builder then finds this context.
            jvm.start_context(
                SparkConf().setMaster(self.master).setAppName(self.app_name).setAll(list(settings.items()))
            )
        session = builder.getOrCreate()
        if fresh:
            cluster.wait_for_executors(session, self.master, self.master_timeout)
        return session


SCHEMA_FILE = "_schema.json"


class TableCatalog(Resource):
    """Spark tables kept as Parquet folders partitioned by ``day`` under one warehouse folder.

    Path-based tables survive across run processes without a Hive metastore (whose embedded Derby
    database admits one JVM at a time, so concurrent runs would fail). Spark reads and writes the rows;
    everything else (clearing days, the schema file) goes through ``mds_core.storage`` like the shard
    store, so a warehouse on a store gets its set-up: retries, ``S3_ENDPOINT_URL``, no listing cache, and
    the fsspec options of ``options()``. Spark's own reads and writes take Spark's settings (docs/cluster.md).
    """

    warehouse: str = env_field("", "MDS_WAREHOUSE", "Warehouse folder or URL; default <data dir>/warehouse")
    storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="fsspec options a run may set for the warehouse's folders; no endpoint, proxy, TLS or "
        "credential option (pipelines.run_config): those go in $MDS_WAREHOUSE_STORAGE_OPTIONS.",
    )
    storage_options_json: str = env_field(
        "",
        "MDS_WAREHOUSE_STORAGE_OPTIONS",
        "Deployment only: fsspec options for the warehouse as a JSON object, endpoints and credentials included",
        deployment_only=True,
    )

    def location(self, table: str) -> str:
        """Where ``table``'s files go in the warehouse."""
        return join(self.warehouse or str(data_dir() / "warehouse"), table)

    def options(self) -> dict[str, Any]:
        """Every fsspec option, as ``store_options`` merges them."""
        return store_options(self)

    def folder(self, table: str) -> RemoteStore:
        """The table's folder as a store; an fsspec URL that mds_core does not know goes to its fallback."""
        return open_store(self.location(table), any_fsspec=True, storage_options=self.options() or None)

    def write_days(self, frame: DataFrame, table: str, days: list[str]) -> None:
        """Replace the table's rows for ``days`` with ``frame``'s; other days stay as they are.

        The days' folders are removed first rather than relying on Spark's dynamic partition
        overwrite, which keeps a day's old rows when the new frame has none for that day.
        """
        location = self.location(table)
        self.clear_days(table, days)
        frame.write.mode("append").partitionBy("day").parquet(location)
        # Spark cannot infer the schema of a table with no rows yet; keep it beside the data (Spark
        # skips files whose names start with '_').
        self.folder(table).write_bytes(SCHEMA_FILE, frame.schema.json().encode())
        # Name it in the session's catalog too, so SQL in the same run can say `SELECT ... FROM <table>`.
        frame.sparkSession.read.schema(frame.schema).parquet(location).createOrReplaceTempView(table)

    def read_days(
        self, spark: SparkSession, table: str, days: list[str], schema: StructType | None = None
    ) -> DataFrame:
        """The table's rows for ``days``; pass ``schema`` for a table that may be empty (nothing to infer from)."""
        from pyspark.sql import functions as F

        location = self.location(table)
        if not self.folder(table).exists(""):
            raise FileNotFoundError(f"table {table!r} has no data at {redact(location)}; materialise its asset first")
        schema = schema or self.stored_schema(table)
        reader = spark.read.schema(schema) if schema is not None else spark.read
        frame = reader.parquet(location)
        return frame.where(F.col("day").isin(days))

    def clear_days(self, table: str, days: list[str]) -> None:
        """Remove the table's folders of ``days``; a day with no folder is fine."""
        folder = self.folder(table)
        for day in days:
            folder.delete_tree(f"day={day}")

    def stored_schema(self, table: str) -> StructType | None:
        """The schema ``write_days`` kept beside the table's data, or None if there is none."""
        from pyspark.sql.types import StructType

        try:
            text = self.folder(table).read_bytes(SCHEMA_FILE)
        except StoreFileNotFoundError:
            return None
        return StructType.fromJson(json.loads(text))


class ShardStore(Resource):
    """Where versioned shard sets live: ``<data dir>/shard-sets`` by default, or ``s3://``, ``gs://``..."""

    root: str = env_field("", "MDS_SHARD_STORE", "Local folder or URL; default <data dir>/shard-sets")
    storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="fsspec options a run may set; no endpoint, proxy, TLS or credential option "
        "(pipelines.run_config): those go in $MDS_STORAGE_OPTIONS.",
    )
    storage_options_json: str = env_field(
        "",
        "MDS_STORAGE_OPTIONS",
        "Deployment only: fsspec options as a JSON object, endpoints and credentials included",
        deployment_only=True,
    )
    cache_dir: str = env_field("", "MDS_CACHE_DIR", "Local cache for reading shards; default <data dir>/cache")

    def url(self, name: str) -> str:
        """The shard set's URL for dataset ``name``."""
        return join(self.root or str(data_dir() / "shard-sets"), name)

    def cache(self, name: str) -> str:
        """The local cache folder for dataset ``name``."""
        return str(Path(self.cache_dir or data_dir() / "cache", name))

    def options(self) -> dict[str, Any]:
        """Every fsspec option, as ``store_options`` merges them."""
        return store_options(self)

    def shard_set(self, name: str) -> ShardSet:
        """The versioned shard set of dataset ``name``."""
        from mds_core.versions import ShardSet

        return ShardSet(self.url(name), storage_options=self.options() or None)


class LandingZone(Resource):
    """Where new files arrive, per dataset ``<root>/<dataset>/<YYYY-MM-DD>/*.parquet|csv|json``.

    A local folder or any fsspec URL (``s3://bucket/landing``); each dataset's sensor watches its own folder.
    """

    path: str = env_field("", "MDS_LANDING_DIR", "Landing folder or URL; default <data dir>/landing")
    storage_options_json: str = env_field(
        "",
        "MDS_LANDING_STORAGE_OPTIONS",
        "Deployment only: fsspec options as a JSON object, endpoints and credentials included",
        deployment_only=True,
    )

    def url(self, dataset: str) -> str:
        """The landing folder of ``dataset``."""
        return join(self.path or str(data_dir() / "landing"), dataset)

    def options(self) -> dict[str, Any]:
        """The deployment's fsspec options for the landing zone."""
        return deployment_json(self, "storage_options_json")


class SmokeTestSettings(Resource):
    """What the loader smoke test demands before a version is published, and how much it reads.

    It reads the new version's new shards in full plus a seeded sample of the older ones, bounded by
    ``sample_rows`` and ``sample_seconds``, so a daily run costs the same on day 2 and on day 1,000.
    """

    # mds_core's defaults for the check (``check_version``'s), so the asset check and ``mds check-loader`` agree.
    num_workers: int = DEFAULT_CHECK_WORKERS
    batch_size: int = DEFAULT_CHECK_BATCH_SIZE
    sample_rows: int = env_field(DEFAULT_SAMPLE_ROWS, "MDS_SMOKE_SAMPLE_ROWS", "Most older rows sampled", ge=0)
    # An int: Dagster binds environment variables to str and int fields only.
    sample_seconds: int = env_field(
        int(DEFAULT_SAMPLE_SECONDS), "MDS_SMOKE_SAMPLE_SECONDS", "Most seconds spent on the older rows", ge=0
    )
    cache_limit: str = Field(
        default="", description="Bound on the check's scratch cache, e.g. 2gb; empty: the checked shards only."
    )
    min_rows_per_second: int = env_field(0, "MDS_SMOKE_MIN_ROWS_PER_SECOND", "Fail below this throughput", ge=0)

    @field_validator("cache_limit")
    @classmethod
    def _check_cache_limit(cls, value: str) -> str:
        """A size that does not parse is refused with the settings, naming the field, before any check runs."""
        try:
            bytes_to_int(value or 0)
        except SizeError as err:
            raise ValueError(f"cache_limit: {err}") from None
        return value


class TrainingWorldSettings(Resource):
    """The training run each new version is planned for (the ``training_plan`` check, ``mds plan``)."""

    world: str = env_field(DEFAULT_WORLD, "MDS_PLAN_WORLD", "NODESxRANKS_PER_NODExWORKERS_PER_RANK")
    batch_size: int = env_field(32, "MDS_PLAN_BATCH_SIZE", "Per-device batch size")
    epochs: int = env_field(1, "MDS_PLAN_EPOCHS", "Epochs to plan")
    cache_limit: str = env_field(
        "",
        "MDS_PLAN_CACHE_LIMIT",
        "Per-node cache_limit, e.g. 50gb; empty: none. The check warns when it would download shards twice",
    )
    bandwidth: str = env_field(
        "", "MDS_PLAN_BANDWIDTH", "Per-node download rate per second, e.g. 1gb; empty: not modelled"
    )
    # A string, not a float: Dagster binds environment variables to str and int fields only.
    consume_seconds: str = env_field(
        "0", "MDS_PLAN_CONSUME_SECONDS", "Training seconds per sample on one rank, e.g. 0.002; 0: not modelled"
    )

    @field_validator("consume_seconds", mode="before")
    @classmethod
    def _check_seconds(cls, value: str) -> str:
        if isinstance(value, str) and not isinstance(value, EnvVar):
            seconds_per_sample(value)
        return value

    def seconds_per_sample(self) -> float | None:
        """``consume_seconds`` as a number; None when it is 0 (not modelled)."""
        return seconds_per_sample(resolved(self.consume_seconds)) or None


def seconds_per_sample(text: str) -> float:
    """``consume_seconds`` as a non-negative number of seconds."""
    try:
        seconds = float(text or 0)
    except ValueError:
        raise ValueError(f"consume_seconds must be a number of seconds, got {text!r}") from None
    if not seconds >= 0:
        raise ValueError(f"consume_seconds must be 0 or more, got {text!r}")
    return seconds


RESOURCES: dict[str, type[ConfigurableResource[Any]]] = {
    "spark": SparkResource,
    "catalog": TableCatalog,
    "shard_store": ShardStore,
    "landing": LandingZone,
    "smoke_settings": SmokeTestSettings,
    "training_world": TrainingWorldSettings,
}


def default_resources(environ: Mapping[str, str]) -> dict[str, Any]:
    """The code location's resources.

    Every field at its default, or bound to its variable where ``environ`` sets it (pass ``os.environ`` when the
    definitions load).
    """
    return {name: bound_to_environment(resource, environ) for name, resource in RESOURCES.items()}


def store_options(resource: TableCatalog | ShardStore) -> dict[str, Any]:
    """``storage_options`` (run-configurable) plus ``storage_options_json`` (the deployment's).

    The run's options are checked before any store is opened: no endpoint, proxy, TLS or credential option.
    """
    kind = type(resource)
    variable = environment_variables(kind)["storage_options_json"]
    check_storage_options(resource.storage_options, f"{kind.__name__}.storage_options", variable)
    return {**resource.storage_options, **deployment_json(resource, "storage_options_json")}
