"""Resources: the Spark session, the local table catalog, the shard store and the landing folder.

Every setting has a default that works offline on a fresh clone and can be changed in two ways:
an environment variable (``MDS_SPARK_MASTER``, ``MDS_SHARD_STORE``, ``MDS_DATA_DIR``, ...), or Dagster
config (the Launchpad's ``resources:`` section, or the resource objects passed to ``Definitions``/
``materialize``). Settings that may hold credentials (``MDS_STORAGE_OPTIONS``, ``MDS_SPARK_CONF``,
``MDS_SPARK_REMOTE``) are passed as ``EnvVar``: Dagster resolves them when a run starts and the UI
shows only the variable's name, never its value.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from mds_core.errors import ConfigurationError, StoreFileNotFoundError
from mds_core.order.world import DEFAULT_WORLD
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.urls import join
from pipelines import cluster, jvm
from pipelines.paths import data_dir

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
    """A Spark session: ``local[*]`` by default, or any master URL (``spark://host:7077``, ``yarn``).

    Sessions are per process (the JVM is), so the first ``session()`` call decides the settings; runs
    use the in-process executor so a run starts one JVM, not one per step.
    """

    master: str = Field(default="local[*]", description="Spark master URL ($MDS_SPARK_MASTER).")
    remote: str = Field(
        default="",
        description="Spark Connect URL, sc://host:port ($MDS_SPARK_REMOTE); when set, "
        "the session is a Connect client and master is not used.",
    )
    app_name: str = "mds-pipelines"
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings (spark.* keys).")
    conf_json: str = Field(
        default="",
        description="More Spark settings as a JSON object, e.g. credentials "
        "($MDS_SPARK_CONF, passed as an EnvVar so the UI never shows it).",
    )
    writer_tasks: int = Field(
        default=0,
        description="Tasks that write a shard set (one sub-directory each); "
        "0: the cluster's default parallelism ($MDS_WRITER_TASKS).",
    )
    master_timeout: float = Field(
        default=cluster.DEFAULT_MASTER_TIMEOUT,
        description="Seconds to reach a spark:// master and get a first executor ($MDS_SPARK_MASTER_TIMEOUT).",
    )

    def settings(self) -> dict[str, str]:
        """``conf`` plus ``conf_json``: every extra Spark setting."""
        return {**self.conf, **_json_object(self.conf_json, "MDS_SPARK_CONF")}

    def session(self) -> SparkSession:
        conf, remote = self.settings(), _resolved(self.remote)
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
    store, so a warehouse on a store gets its set-up: retries, ``S3_ENDPOINT_URL``, no listing cache.
    """

    warehouse: str = Field(default="", description="Warehouse folder or URL; default <data dir>/warehouse.")

    def location(self, table: str) -> str:
        return join(self.warehouse or str(data_dir() / "warehouse"), table)

    def folder(self, table: str) -> RemoteStore:
        """The table's folder as a store; an fsspec URL that mds_core does not know goes to its fallback."""
        return open_store(self.location(table), any_fsspec=True)

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
            raise FileNotFoundError(f"table {table!r} has no data at {location}; materialise its asset first")
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

    root: str = Field(default="", description="Local folder or URL ($MDS_SHARD_STORE).")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="fsspec options (not secret).")
    storage_options_json: str = Field(
        default="",
        description="More fsspec options as a JSON object, e.g. keys "
        "($MDS_STORAGE_OPTIONS, passed as an EnvVar so the UI never shows it).",
    )
    cache_dir: str = Field(default="", description="Local cache for reading shards; default <data dir>/cache.")

    def url(self, name: str) -> str:
        return join(self.root or str(data_dir() / "shard-sets"), name)

    def cache(self, name: str) -> str:
        return str(Path(self.cache_dir or data_dir() / "cache", name))

    def options(self) -> dict[str, Any]:
        """Every fsspec option: ``storage_options`` plus ``storage_options_json``."""
        return {**self.storage_options, **_json_object(self.storage_options_json, "MDS_STORAGE_OPTIONS")}

    def shard_set(self, name: str) -> ShardSet:
        from mds_core.versions import ShardSet

        return ShardSet(self.url(name), storage_options=self.options() or None)


class LandingZone(Resource):
    """Where new files arrive, per dataset ``<root>/<dataset>/<YYYY-MM-DD>/*.parquet|csv|json``: a local
    folder or any fsspec URL (``s3://bucket/landing``); each dataset's sensor watches its own folder."""

    path: str = Field(default="", description="Landing folder or URL; default <data dir>/landing ($MDS_LANDING_DIR).")
    storage_options_json: str = Field(
        default="", description="fsspec options as a JSON object ($MDS_LANDING_STORAGE_OPTIONS, passed as an EnvVar)."
    )

    def url(self, dataset: str) -> str:
        return join(self.path or str(data_dir() / "landing"), dataset)

    def options(self) -> dict[str, Any]:
        return _json_object(self.storage_options_json, "MDS_LANDING_STORAGE_OPTIONS")


class SmokeTestSettings(Resource):
    """What the loader smoke test demands before a version is published, and how much it reads.

    It reads the new version's new shards in full plus a seeded sample of the older ones, bounded by
    ``sample_rows`` and ``sample_seconds``, so a daily run costs the same on day 2 and on day 1,000.
    """

    num_workers: int = 2
    batch_size: int = 16
    sample_rows: int = Field(default=20_000, ge=0, description="Most older rows sampled ($MDS_SMOKE_SAMPLE_ROWS).")
    sample_seconds: float = Field(
        default=30.0, ge=0, description="Most seconds spent on the older rows ($MDS_SMOKE_SAMPLE_SECONDS)."
    )
    cache_limit: str = Field(
        default="", description="Bound on the check's scratch cache, e.g. 2gb; empty: the checked shards only."
    )
    min_rows_per_second: float = Field(
        default=0.0, description="Fail below this throughput ($MDS_SMOKE_MIN_ROWS_PER_SECOND)."
    )


class TrainingWorldSettings(Resource):
    """The training run each new version is planned for (the ``training_plan`` check, ``mds plan``)."""

    world: str = Field(default=DEFAULT_WORLD, description="NODESxRANKS_PER_NODExWORKERS_PER_RANK ($MDS_PLAN_WORLD).")
    batch_size: int = Field(default=32, description="Per-device batch size ($MDS_PLAN_BATCH_SIZE).")
    epochs: int = Field(default=1, description="Epochs to plan ($MDS_PLAN_EPOCHS).")
    cache_limit: str = Field(
        default="",
        description="Per-node cache_limit, e.g. 50gb; empty: none "
        "($MDS_PLAN_CACHE_LIMIT). The check warns when it would download shards twice.",
    )
    bandwidth: str = Field(
        default="",
        description="Per-node download rate per second, e.g. 1gb; empty: not modelled ($MDS_PLAN_BANDWIDTH).",
    )
    consume_seconds: float = Field(
        default=0.0, description="Training seconds per sample on one rank; 0: not modelled ($MDS_PLAN_CONSUME_SECONDS)."
    )


def _resolved(value: str) -> str:
    """A field's value: an ``EnvVar`` left unresolved (a resource used outside a run) is read here."""
    return (value.get_value() or "") if isinstance(value, EnvVar) else value


def _json_object(text: str, name: str) -> dict[str, Any]:
    text = _resolved(text)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ConfigurationError(
            f"${name} is not valid JSON ({err.__class__.__name__} at {err}); give a JSON "
            'object such as {"key": "value"}'
        ) from None  # never echo a secret
    if not isinstance(value, dict):
        raise ConfigurationError(f"${name} must be a JSON object, got a {type(value).__name__}")
    return value


def _secret(env: Mapping[str, str], name: str) -> Any:
    """``EnvVar(name)`` when it is set: resolved at run time, shown in the UI by name only."""
    return EnvVar(name) if env.get(name) else ""


def resources_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Resource]:
    """The default resources, each setting taken from its environment variable when set."""
    env = os.environ if environ is None else environ
    return {
        "spark": SparkResource(
            master=env.get("MDS_SPARK_MASTER", "local[*]"),
            remote=_secret(env, "MDS_SPARK_REMOTE"),
            conf_json=_secret(env, "MDS_SPARK_CONF"),
            writer_tasks=int(env.get("MDS_WRITER_TASKS", "0")),
            master_timeout=float(env.get("MDS_SPARK_MASTER_TIMEOUT", cluster.DEFAULT_MASTER_TIMEOUT)),
        ),
        "catalog": TableCatalog(warehouse=env.get("MDS_WAREHOUSE", "")),
        "shard_store": ShardStore(
            root=env.get("MDS_SHARD_STORE", ""),
            storage_options_json=_secret(env, "MDS_STORAGE_OPTIONS"),
            cache_dir=env.get("MDS_CACHE_DIR", ""),
        ),
        "landing": LandingZone(
            path=env.get("MDS_LANDING_DIR", ""), storage_options_json=_secret(env, "MDS_LANDING_STORAGE_OPTIONS")
        ),
        "smoke_settings": SmokeTestSettings(
            min_rows_per_second=float(env.get("MDS_SMOKE_MIN_ROWS_PER_SECOND", "0")),
            sample_rows=int(env.get("MDS_SMOKE_SAMPLE_ROWS", "20000")),
            sample_seconds=float(env.get("MDS_SMOKE_SAMPLE_SECONDS", "30")),
        ),
        "training_world": TrainingWorldSettings(
            world=env.get("MDS_PLAN_WORLD", DEFAULT_WORLD),
            batch_size=int(env.get("MDS_PLAN_BATCH_SIZE", "32")),
            epochs=int(env.get("MDS_PLAN_EPOCHS", "1")),
            cache_limit=env.get("MDS_PLAN_CACHE_LIMIT", ""),
            bandwidth=env.get("MDS_PLAN_BANDWIDTH", ""),
            consume_seconds=float(env.get("MDS_PLAN_CONSUME_SECONDS", "0")),
        ),
    }
