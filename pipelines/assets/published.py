"""The published pointer: moved to the version this run wrote, only after its smoke test passed."""

# No `from __future__ import annotations`: Dagster reads the resource annotations at runtime.
import datetime as dt
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Failure,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    asset,
)

from mds_core.storage.urls import redact
from mds_core.versions.source_lineage import source_lineage
from pipelines.assets.metadata import Materialized
from pipelines.assets.run_family import family_began, run_family, version_written_by
from pipelines.assets.shards import WRITER_POOL
from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.conventions import conventions, key
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore
from pipelines.retries import RETRY

if TYPE_CHECKING:
    from mds_core.versions import ShardSet


def build_published_version(spec: DatasetSpec) -> AssetsDefinition:
    """The ``published_version`` asset for ``spec``."""
    with dagster_features_we_pin():

        @asset(
            name="published_version",
            deps=[key(spec, "shard_set")],
            pool=WRITER_POOL,
            retry_policy=RETRY,
            freshness_policy=freshness(spec),
            **conventions(spec, "published", {"mds"}),
            description=f"{spec.name}: moves the shard set's published pointer (the root index.json training "
            f"code reads) to the version this run wrote, after the blocking {SMOKE_CHECK} passed.",
        )
        def published_version(context: AssetExecutionContext, shard_store: ShardStore) -> Materialized:
            return publish_written(context, spec, shard_store)

    return published_version


def freshness(spec: DatasetSpec) -> FreshnessPolicy:
    """Fresh when a version was published in the 24 hours before each ``spec.fresh_by`` deadline (UTC).

    The daily run at 01:30 must have published by then. The UI shows the asset as stale otherwise.
    """
    return FreshnessPolicy.cron(deadline_cron=spec.fresh_by, lower_bound_delta=dt.timedelta(hours=24), timezone="UTC")


def publish_written(context: AssetExecutionContext, spec: DatasetSpec, shard_store: ShardStore) -> Materialized:
    """Publish the version the run's family wrote, and record what was published before."""
    shards = shard_store.shard_set(spec.name)
    before = shards.published()
    runs = run_family(context)
    version = publish_runs_version(spec, shards, runs, family_began(context, runs))
    source = source_lineage(shards.version(version))
    return MaterializeResult(metadata=published_metadata(shard_store.url(spec.name), version, before, source))


def publish_runs_version(
    spec: DatasetSpec, shards: "ShardSet", runs: set[str], since: dt.datetime | None = None
) -> int:
    """Publish the version ``runs`` (a run and the runs it re-executes) committed, once their smoke test passed it.

    The shard set says which version that is (its lineage names the run), so a run of another day that committed a newer
    version meanwhile changes nothing.
    """
    written = version_written_by(shards, runs, since)
    if written is None:
        raise Failure(
            f"{spec.name}/shard_set was not materialised in this run: there is no new version to publish. "
            f"Use the {spec.name}_publish job to publish or roll back a version.",
            allow_retries=False,
        )
    # The check's verdict lives with the version; one recorded by another run (the check executed
    # alone, say) does not count: this run must have tested what it publishes.
    verdict = shards.verdict(written.number, SMOKE_CHECK) or {}
    if not (verdict.get("passed") is True and verdict.get("run_id") in runs):
        raise Failure(
            f"version {written.number} was not published: the {SMOKE_CHECK} check did not pass in this run. Run "
            "it with the shard set (the UI's 'Materialize all' and the daily job include it).",
            allow_retries=False,
        )
    shards.publish(written.number)
    return written.number


def published_metadata(
    url: str, version: int, before: int | None, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The version published, the one before, and how to read it.

    With ``StreamingDataset``'s own per-user cache (no ``local=``), never a shared folder such as ``/tmp/cache`` another
    user could fill first. For a version made from a Delta table (``source``: its lineage record), the snippet pins
    both versions: the shard-set version to train on, and the table version its rows are as of.
    """
    shown = redact(url)
    snippet = f"StreamingDataset(remote={shown!r}, version={version}, batch_size=32)"
    table: dict[str, Any] = {}
    if source is not None:
        first, last = source["versions"]
        name = source.get("uc_name") or source["table_uri"]
        table = {"table": name, "table_versions": f"{first}..{last}"}
        read = f'.table("{name}")' if source.get("uc_name") else f'.load("{name}")'
        snippet = (
            f"# shard-set version {version}: Delta table {name} (id {source['table_id']}), table versions {first} to {last}\n"
            f"{snippet}\n"
            f'# its rows as the table had them: spark.read.format("delta").option("versionAsOf", {last}){read}'
        )
    return {
        "published": version,
        "previously_published": before if before is not None else -1,
        "store_url": shown,
        **table,
        "dagster/uri": MetadataValue.text(shown),
        "read_it": MetadataValue.md(f"```python\n{snippet}\n```"),
    }
