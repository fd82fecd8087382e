"""The datasets this code location converts: what each one is (``DatasetSpec``) and where they are declared.

Each dataset gets its own assets (key prefix = its name), daily partitions from its own start date,
checks, jobs, schedules and landing sensor, so two datasets never share history. The package declares
its datasets as Dagster components, one folder each: ``pipelines/defs/<dataset>/defs.yaml``, whose
attributes are a ``DatasetSpec``'s fields (``pipelines.components.Dataset``). A deployment may instead
name a registry file of its own in ``$MDS_DATASETS`` (``datasets:``, a list of ``DatasetSpec``), which
then replaces the package's datasets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mds_core.errors import ConfigurationError

PACKAGED = Path(__file__).resolve().parent / "defs"  # the package's datasets: <dataset>/defs.yaml each
DATASET_COMPONENT = "pipelines.components.Dataset"
COMPONENT_ATTRIBUTES = ("automation",)  # a dataset component's attributes that are not DatasetSpec fields
SourceKind = Literal["digits", "synthetic", "table", "path", "delta"]
SourceFormat = Literal["", "parquet", "csv", "json", "delta"]
NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")  # an asset key part, a table prefix and a folder name: checked
# by the field's pattern, which `dg check yaml` applies to the component files too


class Source(BaseModel):
    """Where a dataset's rows come from (a run's ``raw_table`` config can override any field)."""

    model_config = ConfigDict(extra="forbid")

    kind: SourceKind = "digits"
    table: str = Field(default="", description="Spark table for kind=table.")
    path: str = Field(
        default="",
        description="Files for kind=path (local or any fsspec URL); for kind=delta the table's path, URL or "
        "Unity Catalog name (catalog.schema.table).",
    )
    format: SourceFormat = Field(default="", description="File format; default from the path's suffix.")
    day_column: str = Field(
        default="", description="Column holding each row's day; empty: the whole source is the partition's day."
    )
    rows_per_day: int = Field(default=180, ge=1, description="Rows per day for digits and synthetic.")
    version: int | None = Field(
        default=None, ge=0, description="Delta table version to read (kind=delta); unset: the latest when a run starts."
    )


class DatasetSpec(BaseModel):
    """One dataset: its source, schema, partitions, shard settings and who owns it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME.pattern, description="Asset key prefix, table prefix and shard-set folder.")
    description: str = ""
    source: Source = Field(default_factory=Source)
    schema_ref: str = Field(
        default="pipelines.schemas:DIGITS",
        description="module:attribute of a pipelines.schemas.ValidationSchema, or 'not_null'.",
    )
    start_date: str = Field(
        default="2026-01-01", pattern=r"^\d{4}-\d{2}-\d{2}$", description="First daily partition (YYYY-MM-DD)."
    )
    compression: str = "zstd"
    size_limit: str = "1mb"
    owners: list[str] = Field(default_factory=lambda: ["team:ml-data"])
    tags: dict[str, str] = Field(default_factory=dict)
    pictures: dict[str, tuple[int, int] | None] = Field(
        default_factory=dict,
        description="Columns to picture in the shard set's metadata, with a 2-D shape "
        "for flat arrays (e.g. pixels: [8, 8]).",
    )
    keep_versions: int = Field(
        default=30, ge=1, description="Versions the vacuum schedule keeps (and the published one)."
    )
    schedule: str = Field(
        default="30 1 * * *", description="Cron (UTC) of the daily schedule, which converts the day that just ended."
    )
    fresh_by: str = Field(default="0 6 * * *", description="Cron (UTC): the previous day must be published by then.")

    @field_validator("start_date")
    @classmethod
    def _check_start(cls, start: str) -> str:
        date.fromisoformat(start)  # ValueError names the bad date
        return start

    def day_index(self, day: str) -> int:
        """Days since the first partition: numbers the generated sources' daily slices."""
        return (date.fromisoformat(day) - date.fromisoformat(self.start_date)).days


def registry_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The registry file ``$MDS_DATASETS`` names, which replaces the package's datasets; None when unset."""
    value = (os.environ if environ is None else environ).get("MDS_DATASETS", "")
    return Path(value) if value else None


def load_registry(path: Path | None = None) -> list[DatasetSpec]:
    """The datasets of the registry file ``path``, else of ``$MDS_DATASETS``'s, else the package's own.

    The package's are ``packaged_datasets``. Anything wrong is a ``ConfigurationError`` naming the file.
    """
    path = path or registry_path()
    if path is None:
        return packaged_datasets()
    document = _read(path)
    entries = document.get("datasets", []) if isinstance(document, dict) else None
    return _checked([_spec(path, entry) for entry in entries or []], path)


def packaged_datasets() -> list[DatasetSpec]:
    """The package's datasets.

    The attributes of each ``pipelines/defs/<dataset>/defs.yaml`` of type ``pipelines.components.Dataset`` (what the
    component adds to them, ``COMPONENT_ATTRIBUTES``, left out). Read as Dagster's component loader reads them, for the
    code that needs the datasets without Dagster's definitions (the demo, scripts, tests).
    """
    specs = []
    for path in sorted(PACKAGED.glob("*/defs.yaml")):
        document = _read(path)
        if isinstance(document, dict) and document.get("type") == DATASET_COMPONENT:
            attributes = dict(document.get("attributes") or {})
            specs.append(_spec(path, {k: v for k, v in attributes.items() if k not in COMPONENT_ATTRIBUTES}))
    return _checked(specs, PACKAGED)


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigurationError(f"dataset registry {path}: {err}") from err


def _spec(path: Path, entry: Any) -> DatasetSpec:
    try:
        return DatasetSpec(**entry)
    except (ValidationError, TypeError) as err:
        raise ConfigurationError(f"dataset registry {path}: {err}") from err


def _checked(specs: list[DatasetSpec], where: Path) -> list[DatasetSpec]:
    names = [spec.name for spec in specs]
    if not specs or len(set(names)) != len(names):
        raise ConfigurationError(f"dataset registry {where}: needs at least one dataset and unique names, got {names}")
    return specs
