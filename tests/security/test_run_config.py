"""Finding 3 of the review: run config (the Launchpad's ``resources:`` and ``ops:`` sections) must not send the
deployment's credentials elsewhere, start the JVM with options of its own, or import a module of its choosing.

Every resource field can be replaced in run config, the EnvVar-bound ``*_json`` fields too, so:

* ``ShardStore.storage_options`` refuses, at any depth, keys that redirect requests or carry or choose
  credentials; nothing reaches a loopback listener standing in for the attacker's host;
* ``SparkResource.spark_config`` takes only an allow-list of tuning keys; no JVM is started for a refused one;
* ``spark_config_json`` and the three ``storage_options_json`` fields are honoured only when their value is
  their variable's ($MDS_SPARK_CONF, $MDS_STORAGE_OPTIONS, $MDS_LANDING_STORAGE_OPTIONS,
  $MDS_WAREHOUSE_STORAGE_OPTIONS);
* ``schema_ref`` names ``pipelines.schemas`` or the dataset's own registry module, checked before any import.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from dagster import EnvVar, Failure, materialize

from mds_core.errors import ConfigurationError
from mds_core.versions import ShardSet
from pipelines.assets.raw import build_raw_table
from pipelines.assets.validated import build_validated_table, load_schema
from pipelines.definitions import build_definitions
from pipelines.registry import DatasetSpec
from pipelines.resources import LandingZone, ShardStore, SparkResource, TableCatalog, default_resources
from tests.security.conftest import Listener, commit_ids

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DAY = "2026-01-01"
DIGITS = DatasetSpec(name="digits")
# load_schema decides on the reference before it looks at the frame: these tests give it none.
NO_FRAME = cast("DataFrame", None)


def publish_run(resources: dict[str, Any], shard_store: dict[str, Any]) -> None:
    """The digits dataset's publish job (it needs no Spark), with ``shard_store`` as the Launchpad's run config."""
    job = build_definitions([DIGITS], resources).resolve_job_def("digits_publish")
    job.execute_in_process(run_config={"resources": {"shard_store": {"config": shard_store}}})


# -------------------------------------------------------------------------------------------------
# ShardStore.storage_options from run config


@pytest.mark.parametrize(
    ("root", "options", "refused"),
    [
        # The review's example: a Unity Catalog volume whose client takes `host` and sends $DATABRICKS_TOKEN there.
        ("dbfs:/Volumes/c/s/v/sets", {"host": "{listener}"}, "'host'"),
        # s3fs signs with the deployment's AWS keys for whatever endpoint botocore is given.
        ("s3://bucket/sets", {"client_kwargs": {"endpoint_url": "{listener}"}}, "'client_kwargs.endpoint_url'"),
        # gcsfs sends the host's Application Default Credentials' bearer token to endpoint_url.
        ("gs://bucket/sets", {"endpoint_url": "{listener}", "token": "google_default"}, "'endpoint_url', 'token'"),
        ("s3://bucket/sets", {"config_kwargs": {"proxies": {"https": "{listener}"}}}, "'config_kwargs.proxies'"),
    ],
)
def test_run_config_cannot_send_the_shard_stores_requests_elsewhere(
    root: str, options: dict[str, Any], refused: str, listener: Listener, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("DATABRICKS_HOST", "https://127.0.0.1:9")  # the deployment's own settings
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-deployment-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEPLOYMENTKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "deployment-secret")
    monkeypatch.delenv("S3_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("MDS_DATA_DIR", str(tmp_path))
    options = json.loads(json.dumps(options).replace("{listener}", listener.url))
    message = (
        rf"^ShardStore.storage_options: {refused} may not be set in run config: endpoint, proxy, TLS and "
        r"credential options would send this deployment's requests, and the credentials they carry, elsewhere\. "
        r"Only the deployment's \$MDS_STORAGE_OPTIONS sets them"
    )
    with pytest.raises(ConfigurationError, match=message):
        publish_run(default_resources({}), {"root": root, "storage_options": options})
    assert listener.received == []  # refused before any request


def test_harmless_storage_options_still_reach_the_store(tmp_path) -> None:
    store = ShardStore(root=str(tmp_path / "sets"), storage_options={"auto_mkdir": True, "skip_instance_cache": True})
    assert store.options() == {"auto_mkdir": True, "skip_instance_cache": True}


# -------------------------------------------------------------------------------------------------
# SparkResource.spark_config from run config


@pytest.mark.parametrize(
    "setting",
    [
        {"spark.driver.extraJavaOptions": "-javaagent:/tmp/agent.jar"},
        {"spark.jars": "/tmp/evil.jar"},
        {"spark.sql.adaptive.customCostEvaluatorClass": "evil.Cost"},
        {"spark.executorEnv.PYTHONPATH": "/tmp/evil"},
        {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9"},
    ],
)
def test_run_config_spark_settings_outside_the_allow_list_are_refused_before_a_jvm_starts(setting, tmp_path) -> None:
    from pyspark import SparkContext

    key = next(iter(setting))
    resources = {"spark": SparkResource(), "catalog": TableCatalog(warehouse=str(tmp_path / "warehouse"))}
    run_config = {"resources": {"spark": {"config": {"spark_config": {"spark.sql.shuffle.partitions": 8, **setting}}}}}
    with pytest.raises(Failure) as failed:
        materialize([build_raw_table(DIGITS)], resources=resources, partition_key=DAY, run_config=run_config)
    assert isinstance(failed.value.__cause__, ConfigurationError)
    assert failed.value.description == (
        f"SparkResource.spark_config: {key!r} may not be set in run config: it takes only the tuning settings "
        "docs/pipelines.md lists (shuffle partitions, memory, cores, adaptive execution...). Settings that load "
        "code, set JVM or Python options, environment variables or other hosts belong in the deployment's "
        "$MDS_SPARK_CONF"
    )
    assert SparkContext._gateway is None  # no JVM was started


def test_tuning_settings_from_run_config_are_taken() -> None:
    spark = SparkResource(spark_config={"spark.sql.shuffle.partitions": 8, "spark.executor.memory": "2g"})
    assert spark.settings() == {"spark.sql.shuffle.partitions": "8", "spark.executor.memory": "2g"}


# -------------------------------------------------------------------------------------------------
# The deployment-only fields: only their variable's value


DEPLOYMENT_FIELDS = [
    (SparkResource, "spark_config_json", "MDS_SPARK_CONF", lambda r: r.settings()),
    (ShardStore, "storage_options_json", "MDS_STORAGE_OPTIONS", lambda r: r.options()),
    (LandingZone, "storage_options_json", "MDS_LANDING_STORAGE_OPTIONS", lambda r: r.options()),
    (TableCatalog, "storage_options_json", "MDS_WAREHOUSE_STORAGE_OPTIONS", lambda r: r.options()),
]


@pytest.mark.parametrize(("resource", "field", "variable", "use"), DEPLOYMENT_FIELDS)
def test_a_deployment_only_field_takes_only_its_variables_value(resource, field, variable, use, monkeypatch) -> None:
    deployment = '{"spark.executor.cores": "2"}' if resource is SparkResource else '{"anon": false}'
    monkeypatch.setenv(variable, deployment)
    monkeypatch.setenv("OTHER_VARIABLE", '{"endpoint_url": "http://127.0.0.1:9"}')
    assert use(resource(**{field: EnvVar(variable)})) == json.loads(deployment)  # bound to its variable
    assert use(resource(**{field: deployment})) == json.loads(deployment)  # or its value exactly
    assert use(resource(**{field: ""})) == {}  # empty: nothing to honour
    message = (
        rf"^{resource.__name__}.{field} can carry credentials, endpoints and JVM options: only the deployment's "
        rf"\${variable} sets it; run config may not \(this run's value is not \${variable}'s\)"
    )
    for other in ('{"endpoint_url": "http://127.0.0.1:9"}', EnvVar("OTHER_VARIABLE")):
        with pytest.raises(ConfigurationError, match=message):
            use(resource(**{field: other}))
    monkeypatch.delenv(variable)
    with pytest.raises(ConfigurationError, match=message):
        use(resource(**{field: deployment}))  # a literal, with the variable unset


def test_a_storage_options_json_literal_in_run_config_is_refused_and_the_envvar_bound_one_works(
    listener: Listener, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("MDS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEPLOYMENTKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "deployment-secret")
    monkeypatch.setenv("MDS_STORAGE_OPTIONS", '{"auto_mkdir": true}')
    monkeypatch.setenv("OTHER_VARIABLE", json.dumps({"client_kwargs": {"endpoint_url": listener.url}}))
    resources = default_resources({"MDS_STORAGE_OPTIONS": "set"})  # bound, as the code location binds it
    literal = json.dumps({"client_kwargs": {"endpoint_url": listener.url}})
    with pytest.raises(ConfigurationError, match=r"^ShardStore.storage_options_json can carry credentials"):
        publish_run(resources, {"root": "s3://bucket/sets", "storage_options_json": literal})
    with pytest.raises(ConfigurationError, match=r"^ShardStore.storage_options_json can carry credentials"):
        publish_run(resources, {"root": "s3://bucket/sets", "storage_options_json": {"env": "OTHER_VARIABLE"}})
    assert listener.received == []
    # The deployment's own value, through its EnvVar: the job rolls the shard set back with it.
    root = tmp_path / "sets"
    for _ in range(2):
        commit_ids(ShardSet(str(root / "digits")), [1])
    publish_run(resources, {"root": str(root), "storage_options_json": {"env": "MDS_STORAGE_OPTIONS"}})
    assert ShardSet(str(root / "digits")).published() == 1


# -------------------------------------------------------------------------------------------------
# schema_ref


@pytest.fixture
def planted(tmp_path, monkeypatch) -> Path:
    """A module on sys.path that leaves a marker file when it is imported."""
    marker = tmp_path / "imported"
    (tmp_path / "planted_schema.py").write_text(f"open({str(marker)!r}, 'w').close()\nSCHEMA = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "planted_schema", raising=False)
    return marker


def test_a_schema_ref_outside_the_registry_is_refused_without_importing_it(planted: Path) -> None:
    message = (
        "schema_ref 'planted_schema:SCHEMA' names the module 'planted_schema', which the dataset registry does not "
        "declare for digits: run config may name a schema in pipelines.schemas, or 'not_null'; declare another "
        "module in the dataset's registry entry (schema_ref)"
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        load_schema("planted_schema:SCHEMA", NO_FRAME, DIGITS)
    assert not planted.exists()


def test_a_schema_ref_in_run_config_is_refused_before_spark_and_before_the_import(planted: Path, tmp_path) -> None:
    from pyspark import SparkContext

    resources = {"spark": SparkResource(), "catalog": TableCatalog(warehouse=str(tmp_path / "warehouse"))}
    run_config = {"ops": {"digits__validated_table": {"config": {"schema_ref": "planted_schema:SCHEMA"}}}}
    with pytest.raises(Failure, match="which the dataset registry does not declare for digits"):
        materialize([build_validated_table(DIGITS)], resources=resources, partition_key=DAY, run_config=run_config)
    assert not planted.exists() and SparkContext._gateway is None


def test_the_registrys_own_schema_module_may_be_named(planted: Path) -> None:
    spec = DatasetSpec(name="events", schema_ref="planted_schema:SCHEMA")
    with pytest.raises(ValueError, match="is a NoneType, not a pipelines.schemas.ValidationSchema"):
        load_schema("planted_schema:SCHEMA", NO_FRAME, spec)  # declared: imported, then found to be no schema
    assert planted.exists()


# -------------------------------------------------------------------------------------------------
# the documentation


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def _names(line: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", line))


def test_the_docs_list_the_rules_the_code_applies() -> None:
    from pipelines.resources import RESOURCES
    from pipelines.run_config import REFUSED_OPTION_FRAGMENTS, REFUSED_OPTION_NAMES, RUN_CONFIG_SPARK_SETTINGS
    from pipelines.settings import deployment_only_fields

    page = (Path(__file__).resolve().parents[2] / "docs" / "pipelines.md").read_text()
    section = _section(page, "### What run config may set", "## Schemas")
    deployment_only = {
        f"`{resource.__name__}.{field}` (`{variable}`)"
        for resource in RESOURCES.values()
        for field, variable in deployment_only_fields(resource).items()
    }
    [row] = [line for line in section.splitlines() if line.startswith("| `SparkResource.spark_config_json`")]
    assert set(re.findall(r"`\w+\.\w+` \(`\w+`\)", row)) == deployment_only
    refused = _section(section, "`ShardStore.storage_options` refuses", "(case, `_` and `-` ignored)")
    [names] = [line for line in refused.splitlines() if line.startswith("* these option names:")]
    assert _names(names) == REFUSED_OPTION_NAMES
    fragments = refused[refused.index("* and every name containing one of:") :]
    assert _names(fragments) == REFUSED_OPTION_FRAGMENTS
    allowed = _section(section, "`SparkResource.spark_config` takes from run config only", "Anything else")
    assert _names(allowed) - {"SparkResource.spark_config"} == RUN_CONFIG_SPARK_SETTINGS
