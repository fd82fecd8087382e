"""The training plan: what a declared training world would download, cache and wait for on a new version.

A non-blocking check on the shard set. It plans the version this run wrote (or, executed on its
own, the latest one) with ``mds_core.plan`` and records the figures and a plot as metadata; it
warns when the declared ``cache_limit`` would download shards twice or is refused by the loader.
"""

# No `from __future__ import annotations`: Dagster reads the resource annotations at runtime.
import base64
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from pipelines.assets.run_family import version_to_check
from pipelines.conventions import daily, key
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore, TrainingWorldSettings

if TYPE_CHECKING:  # imported when the check runs
    from mds_core.plan import TrainingPlan

PLAN_CHECK = "training_plan"
# What the time model lacks, in the check's own settings (the CLI's report names its options instead).
TIMING_SETTINGS = (
    "Set MDS_PLAN_BANDWIDTH (the per-node link) and MDS_PLAN_CONSUME_SECONDS (training seconds per sample) "
    "for the time to the first batch and the waiting."
)


def plan_version(
    shard_store: ShardStore, dataset: str, version: int, settings: TrainingWorldSettings
) -> "TrainingPlan":
    """``mds_core.plan`` on one version of the shard set, for the declared world (its index only)."""
    from mds_core.order.world import parse_world
    from mds_core.plan import Environment, plan_training
    from mds_core.sizes import bytes_to_int

    shards = shard_store.shard_set(dataset).shards(version)
    environment = Environment(
        bandwidth=bytes_to_int(settings.bandwidth) if settings.bandwidth else None,
        consume_seconds=settings.seconds_per_sample(),
    )
    return plan_training(
        [shards],
        parse_world(settings.world),
        settings.batch_size,
        epochs=settings.epochs,
        cache_limit=bytes_to_int(settings.cache_limit) if settings.cache_limit else None,
        environment=environment,
        shuffle=True,
    )


def plan_metadata(plan: "TrainingPlan") -> dict[str, Any]:
    """The plan's headline figures and its text report, as check metadata."""
    from mds_core.plan.report import render_text

    first = plan.epochs[0]
    return {
        "world": plan.settings["world"],
        "batch_size": MetadataValue.text(str(plan.settings["batch_size"])),  # a setting: not plotted
        "bytes_per_node_first_epoch": MetadataValue.json([n.bytes_downloaded for n in first.nodes]),
        "peak_cache_bytes_per_node": MetadataValue.json([n.peak_cache_bytes for n in plan.epochs[-1].nodes]),
        "smallest_cache_limit": plan.smallest_cache_limit,
        "shards_fetched_again": plan.refetched_shards,
        "first_batch_seconds": MetadataValue.json([_rounded(n.first_batch_seconds, 3) for n in first.nodes]),
        "data_wait_fraction": MetadataValue.json([_rounded(n.data_wait_fraction, 3) for n in first.nodes]),
        "recommendations": MetadataValue.md(
            "\n".join(f"* **{r.setting}** = {r.value}: {r.reason}" for r in plan.recommendations)
        ),
        "plan": MetadataValue.md(f"```\n{render_text(plan, hint=TIMING_SETTINGS)}\n```"),
        "plan_json": MetadataValue.json(plan.to_json()),
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def headline(plan: "TrainingPlan") -> str:
    """What the UI shows at a glance, beside the full report in the metadata."""
    first = plan.epochs[0]
    recommended = next((r for r in plan.recommendations if r.setting == "cache_limit"), None)
    parts = [
        f"{plan.settings['world']}: at most {max(n.bytes_downloaded for n in first.nodes):,} bytes per node "
        "in the first epoch",
        f"cache_limit {recommended.value:,} bytes recommended" if recommended and recommended.value else "",
    ]
    return "; ".join(part for part in parts if part)


def plot_metadata(plan: "TrainingPlan") -> dict[str, Any]:
    """The cache and download curves as a PNG embedded in markdown; nothing when matplotlib is missing."""
    from mds_core.errors import ConfigurationError
    from mds_core.plan.report import save_plot

    with tempfile.TemporaryDirectory(prefix="mds-plan-") as folder:
        path = Path(folder) / "plan.png"
        try:
            save_plot(plan, str(path))
        except ConfigurationError as err:
            return {"plot": MetadataValue.text(str(err))}
        encoded = base64.b64encode(path.read_bytes()).decode()
    return {"plot": MetadataValue.md(f"![cache and downloads per node](data:image/png;base64,{encoded})")}


def build_plan_check(spec: DatasetSpec) -> AssetChecksDefinition:
    """The shard set's training-plan asset check for ``spec``."""
    with dagster_features_we_pin():

        @asset_check(
            asset=key(spec, "shard_set"),
            name=PLAN_CHECK,
            blocking=False,
            partitions_def=daily(spec),
            description="Plans the new version for the declared training world (MDS_PLAN_*): bytes each "
            "node downloads, peak cache, the smallest cache_limit without repeated downloads, "
            "modelled time to first batch and waiting, recommendations and a plot. Warns, "
            "never blocks.",
        )
        def training_plan(
            context: AssetCheckExecutionContext, shard_store: ShardStore, training_world: TrainingWorldSettings
        ) -> AssetCheckResult:
            return run_plan(context, spec, shard_store, training_world)

    return training_plan


def run_plan(
    context: AssetCheckExecutionContext,
    spec: DatasetSpec,
    shard_store: ShardStore,
    training_world: TrainingWorldSettings,
) -> AssetCheckResult:
    """Plan the training world's run over the version to check; warn when there is none."""
    version = version_to_check(context, spec, shard_store)
    if version is None:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=f"{spec.name} has no version yet: nothing to plan",
        )
    plan = plan_version(shard_store, spec.name, version, training_world)
    problems = _problems(plan)
    context.log.info(
        f"training plan of version {version} for {plan.settings['world']}: "
        f"{'; '.join(problems) or 'no repeated downloads'}"
    )
    return AssetCheckResult(
        passed=not problems,
        severity=AssetCheckSeverity.WARN,
        description="; ".join(problems) or headline(plan),
        metadata={"version": version, **plan_metadata(plan), **plot_metadata(plan)},
    )


def _problems(plan: "TrainingPlan") -> list[str]:
    limit = plan.settings["cache_limit"]
    if limit is None:
        return []
    out = []
    if plan.refetched_shards:
        out.append(
            f"cache_limit={limit:,} bytes downloads {plan.refetched_shards:,} shard(s) again; no repeat needs "
            f"{plan.smallest_cache_limit:,} bytes per node"
        )
    if limit < plan.settings["loader_minimum_cache_limit"]:
        out.append(
            f"StreamingDataset refuses cache_limit={limit:,} bytes for this order (it needs "
            f"{plan.settings['loader_minimum_cache_limit']:,})"
        )
    return out
