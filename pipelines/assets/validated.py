"""The validated table and its quarantine: every raw row ends in exactly one of them."""

# No `from __future__ import annotations`: Dagster reads the Config and resource annotations at runtime.
import importlib
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from pipelines.assets.metadata import Materialized, standard_metadata
from pipelines.conventions import conventions, daily, key
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import DatasetSpec
from pipelines.resources import SparkResource, TableCatalog
from pipelines.retries import RETRY, failures_are_final
from pipelines.schemas import ValidationSchema, not_null_schema, pandera_errors, split_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

COUNTS_CHECK = "quarantine_counts"


class ValidateConfig(Config):
    max_quarantined_fraction: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="The counts check fails when more than this fraction of rows is quarantined.",
    )
    schema_ref: str = Field(
        default="",
        description="module:attribute of a ValidationSchema, or 'not_null'; empty keeps the dataset's schema.",
    )


def build_validated_table(spec: DatasetSpec) -> AssetsDefinition:
    with dagster_features_we_pin():
        counts_spec = AssetCheckSpec(
            COUNTS_CHECK,
            asset=key(spec, "validated_table"),
            blocking=True,
            partitions_def=daily(spec),
            description="in = valid + quarantined, and the quarantined share is within the threshold",
        )

        @asset(
            name="validated_table",
            deps=[key(spec, "raw_table")],
            check_specs=[counts_spec],
            retry_policy=RETRY,
            **conventions(spec, "validated", {"spark", "pandera", "parquet"}, {"schema": spec.schema_ref}),
            description=f"{spec.name}: raw rows that pass the pandera.pyspark schema; the others go to the "
            "quarantine table with the reason.",
        )
        def validated_table(
            context: AssetExecutionContext, config: ValidateConfig, spark: SparkResource, catalog: TableCatalog
        ) -> Materialized:
            with failures_are_final():
                return validate(context, spec, config, spark, catalog)

    return validated_table


def validate(
    context: AssetExecutionContext,
    spec: DatasetSpec,
    config: ValidateConfig,
    spark: SparkResource,
    catalog: TableCatalog,
) -> Materialized:
    days, name = context.partition_keys, spec.name
    raw = catalog.read_days(spark.session(), f"{name}_raw", days)
    schema = load_schema(config.schema_ref or spec.schema_ref, raw)
    valid, quarantined = split_rows(raw, schema)
    catalog.write_days(valid, f"{name}_validated", days)
    catalog.write_days(quarantined, f"{name}_quarantine", days)
    # Count what was written, not what was planned: the check is about the tables as they are.
    session = spark.session()
    written_valid = catalog.read_days(session, f"{name}_validated", days, valid.schema)
    written_quarantine = catalog.read_days(session, f"{name}_quarantine", days, quarantined.schema)
    counts = {"in": raw.count(), "valid": written_valid.count(), "quarantined": written_quarantine.count()}
    leftover = pandera_errors(written_valid, schema.build())
    check = counts_check(counts, config.max_quarantined_fraction, top_reasons(written_quarantine), leftover)
    location = catalog.location(f"{name}_validated")
    return MaterializeResult(
        metadata={
            **standard_metadata(counts["valid"], location, valid.dtypes),
            **counts,
            "schema": schema.name,
            "validated_location": MetadataValue.path(location),
            "quarantine_location": MetadataValue.path(catalog.location(f"{name}_quarantine")),
        },
        check_results=[check],
    )


def load_schema(reference: str, frame: "DataFrame") -> ValidationSchema:
    """``module:attribute`` naming a ValidationSchema, or ``not_null`` for the source's own columns."""
    if reference == "not_null":
        return not_null_schema(frame)
    module_name, _, attribute = reference.partition(":")
    try:
        schema = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(
            f"schema {reference!r} cannot be loaded ({error}); give module:attribute of a "
            "pipelines.schemas.ValidationSchema, or 'not_null'"
        ) from error
    if not isinstance(schema, ValidationSchema):
        raise ValueError(f"schema {reference!r} is a {type(schema).__name__}, not a pipelines.schemas.ValidationSchema")
    return schema


def top_reasons(quarantined: "DataFrame", limit: int = 5) -> dict[str, int]:
    rows = quarantined.groupBy("reason").count().orderBy("count", ascending=False).limit(limit).collect()
    return {row["reason"]: row["count"] for row in rows}


def counts_check(
    counts: dict[str, int], threshold: float, reasons: dict[str, int], leftover: dict[str, Any]
) -> AssetCheckResult:
    fraction = counts["quarantined"] / counts["in"] if counts["in"] else 0.0
    balanced = counts["in"] == counts["valid"] + counts["quarantined"]
    passed = balanced and fraction <= threshold and not leftover
    return AssetCheckResult(
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
