"""The validated table and the quarantine table, two assets of one step: every raw row ends in exactly one of them."""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from pydantic import Field

from mds_core.errors import ConfigurationError
from mds_core.storage.urls import redact
from pipelines.assets.metadata import Materialized, standard_metadata
from pipelines.conventions import asset_spec, daily, key, op_name
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import SparkResource, TableCatalog
from pipelines.retries import RETRY, failures_are_final
from pipelines.schemas import ValidationSchema, not_null_schema, pandera_errors, split_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

COUNTS_CHECK = "quarantine_counts"
NOT_NULL = "not_null"
SCHEMAS_MODULE = "pipelines.schemas"
REASONS_CHECK = "quarantine_reasons"


class ValidateConfig(Config):
    """The run config of the validation step."""

    max_quarantined_fraction: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="The counts check fails when more than this fraction of rows is quarantined.",
    )
    schema_ref: str = Field(
        default="",
        description="module:attribute of a ValidationSchema in pipelines.schemas or in the module the dataset's "
        "registry entry names, or 'not_null'; empty keeps the dataset's schema.",
    )


def build_validated_table(spec: DatasetSpec) -> AssetsDefinition:
    """``validated_table`` and ``quarantine_table``: one step (one read of the raw rows) makes both."""
    validated, quarantine = key(spec, "validated_table"), key(spec, "quarantine_table")
    settings = {"schema": spec.schema_ref}
    with dagster_features_we_pin():
        checks = [
            AssetCheckSpec(
                COUNTS_CHECK,
                asset=validated,
                blocking=True,
                partitions_def=daily(spec),
                description="in = valid + quarantined, and the quarantined share is within the threshold",
            ),
            AssetCheckSpec(
                REASONS_CHECK,
                asset=quarantine,
                partitions_def=daily(spec),
                description="every quarantined row names the rules it breaks, and the table holds every row "
                "the schema turned away",
            ),
        ]
        specs = [
            asset_spec(
                spec,
                "validated_table",
                "validated",
                {"spark", "pandera", "parquet"},
                f"{spec.name}: raw rows that pass the pandera.pyspark schema.",
                [key(spec, "raw_table")],
                settings,
            ),
            asset_spec(
                spec,
                "quarantine_table",
                "quarantine",
                {"spark", "pandera", "parquet"},
                f"{spec.name}: raw rows the schema turned away, each with a `reason` naming every rule it breaks.",
                [key(spec, "raw_table")],
                settings,
            ),
        ]

        @multi_asset(
            name=op_name(spec, "validated_table"),
            specs=specs,
            check_specs=checks,
            partitions_def=daily(spec),
            backfill_policy=BackfillPolicy.single_run(),
            retry_policy=RETRY,
        )
        def validated_table(
            context: AssetExecutionContext, config: ValidateConfig, spark: SparkResource, catalog: TableCatalog
        ) -> Iterator[Materialized | AssetCheckResult]:
            with failures_are_final():
                yield from validate(context, spec, config, spark, catalog)

    return validated_table


def validate(
    context: AssetExecutionContext,
    spec: DatasetSpec,
    config: ValidateConfig,
    spark: SparkResource,
    catalog: TableCatalog,
) -> Iterator[Materialized | AssetCheckResult]:
    """Split the raw days into valid and quarantined rows, write both tables, and check the counts."""
    days, name = context.partition_keys, spec.name
    reference = config.schema_ref or spec.schema_ref
    check_schema_ref(reference, spec)  # before Spark starts, and before anything is imported
    raw = catalog.read_days(spark.session(), f"{name}_raw", days)
    schema = load_schema(reference, raw, spec)
    valid, quarantined = split_rows(raw, schema)
    catalog.write_days(valid, f"{name}_validated", days)
    catalog.write_days(quarantined, f"{name}_quarantine", days)
    # Count what was written, not what was planned: the checks are about the tables as they are.
    session = spark.session()
    written_valid = catalog.read_days(session, f"{name}_validated", days, valid.schema)
    written_quarantine = catalog.read_days(session, f"{name}_quarantine", days, quarantined.schema)
    counts = {"in": raw.count(), "valid": written_valid.count(), "quarantined": written_quarantine.count()}
    leftover = pandera_errors(written_valid, schema.build())
    reasons = top_reasons(written_quarantine)
    location, quarantine_location = catalog.location(f"{name}_validated"), catalog.location(f"{name}_quarantine")
    yield MaterializeResult(
        asset_key=key(spec, "validated_table"),
        metadata={
            **standard_metadata(counts["valid"], location, valid.dtypes),
            **counts,
            "schema": schema.name,
            "validated_location": MetadataValue.path(redact(location)),
            "quarantine_location": MetadataValue.path(redact(quarantine_location)),
        },
    )
    yield counts_check(counts, config.max_quarantined_fraction, reasons, leftover, key(spec, "validated_table"))
    yield MaterializeResult(
        asset_key=key(spec, "quarantine_table"),
        metadata={
            **standard_metadata(counts["quarantined"], quarantine_location, quarantined.dtypes),
            "schema": schema.name,
            "top_reasons": MetadataValue.json(reasons),
        },
    )
    unexplained = written_quarantine.where("reason IS NULL OR reason = ''").count()
    yield reasons_check(spec, counts["quarantined"], unexplained, reasons)


def reasons_check(spec: DatasetSpec, quarantined: int, unexplained: int, reasons: dict[str, int]) -> AssetCheckResult:
    """The quarantine table's own check.

    Every row in it says which rules it breaks (whether there are too many is the validated table's
    ``quarantine_counts``).
    """
    return AssetCheckResult(
        asset_key=key(spec, "quarantine_table"),
        check_name=REASONS_CHECK,
        passed=unexplained == 0,
        severity=AssetCheckSeverity.ERROR,
        description=f"{unexplained} of {quarantined} quarantined rows name no reason" if unexplained else None,
        metadata={"quarantined": quarantined, "unexplained": unexplained, "top_reasons": MetadataValue.json(reasons)},
    )


def schema_modules(spec: DatasetSpec) -> list[str]:
    """The modules a ``schema_ref`` may name for ``spec``.

    The pipelines' own, and the one its registry entry declares. Naming a module imports it, so a run's config may not
    choose any other.
    """
    declared = spec.schema_ref.partition(":")[0] if spec.schema_ref != NOT_NULL else SCHEMAS_MODULE
    return sorted({SCHEMAS_MODULE, declared})


def check_schema_ref(reference: str, spec: DatasetSpec) -> None:
    """Raise ``ConfigurationError`` for a ``schema_ref`` naming a module ``schema_modules`` does not list."""
    module_name = reference.partition(":")[0]
    if reference != NOT_NULL and module_name not in schema_modules(spec):
        raise ConfigurationError(
            f"schema_ref {reference!r} names the module {module_name!r}, which the dataset registry does not "
            f"declare for {spec.name}: run config may name a schema in {' or '.join(schema_modules(spec))}, or "
            f"{NOT_NULL!r}; declare another module in the dataset's registry entry (schema_ref)"
        )


def load_schema(reference: str, frame: "DataFrame", spec: DatasetSpec) -> ValidationSchema:
    """The ValidationSchema a ``schema_ref`` names.

    ``module:attribute`` in a module ``schema_modules(spec)`` lists, or ``not_null`` for the source's own columns.
    """
    if reference == NOT_NULL:
        return not_null_schema(frame)
    check_schema_ref(reference, spec)
    module_name, _, attribute = reference.partition(":")
    try:
        schema = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(
            f"schema {reference!r} cannot be loaded ({error}); give module:attribute of a "
            "pipelines.schemas.ValidationSchema, or 'not_null'"
        ) from error
    if not isinstance(schema, ValidationSchema):
        raise ConfigurationError(
            f"schema {reference!r} is a {type(schema).__name__}, not a pipelines.schemas.ValidationSchema"
        )
    return schema


def top_reasons(quarantined: "DataFrame", limit: int = 5) -> dict[str, int]:
    """The ``limit`` most frequent reasons rows were quarantined, with their counts."""
    rows = quarantined.groupBy("reason").count().orderBy("count", ascending=False).limit(limit).collect()
    return {row["reason"]: row["count"] for row in rows}


def counts_check(
    counts: dict[str, int], threshold: float, reasons: dict[str, int], leftover: dict[str, Any], asset: AssetKey
) -> AssetCheckResult:
    """Pass when every row went to one table and the quarantined fraction is at most ``threshold``."""
    fraction = counts["quarantined"] / counts["in"] if counts["in"] else 0.0
    balanced = counts["in"] == counts["valid"] + counts["quarantined"]
    passed = balanced and fraction <= threshold and not leftover
    return AssetCheckResult(
        asset_key=asset,
        check_name=COUNTS_CHECK,
        passed=passed,
        severity=AssetCheckSeverity.ERROR,
        description=None if passed else _failure(balanced, fraction, threshold, leftover),
        metadata={
            **counts,
            "quarantined_fraction": fraction,
            "threshold": threshold,
            "balanced": balanced,
            "top_reasons": MetadataValue.json(reasons),
            "pandera_errors_in_valid": MetadataValue.json(leftover),
        },
    )


def _failure(balanced: bool, fraction: float, threshold: float, leftover: dict[str, Any]) -> str:
    if not balanced:
        return "rows went missing: in != valid + quarantined"
    if leftover:
        return "pandera still finds errors in the valid rows (a check without a row rule?)"
    return f"{fraction:.2%} of rows quarantined, above the threshold of {threshold:.2%}"
