"""The datasets this code location converts, declared in a small YAML registry.

Each entry gets its own assets (key prefix = its name), daily partitions from its own start date,
checks, jobs, schedules and landing sensor, so two datasets never share history. The registry is
``pipelines/datasets.yaml`` unless ``$MDS_DATASETS`` names another file.
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mds_core.errors import ConfigurationError

DEFAULT_REGISTRY = Path(__file__).resolve().parent / "datasets.yaml"
SourceKind = Literal["digits", "synthetic", "table", "path"]
SourceFormat = Literal["", "parquet", "csv", "json", "delta"]
NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")  # an asset key part, a table prefix and a folder name


class Source(BaseModel):
    """Where a dataset's rows come from (a run's ``raw_table`` config can override any field)."""

    model_config = ConfigDict(extra="forbid")

    kind: SourceKind = "digits"
    table: str = Field(default="", description="Spark table for kind=table.")
    path: str = Field(default="", description="Files for kind=path (local or any fsspec URL).")
    format: SourceFormat = Field(default="", description="File format; default from the path's suffix.")
    day_column: str = Field(
        default="", description="Column holding each row's day; empty: the whole source is the partition's day."
    )
    rows_per_day: int = Field(default=180, ge=1, description="Rows per day for digits and synthetic.")


class DatasetSpec(BaseModel):
    """One dataset: its source, schema, partitions, shard settings and who owns it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    source: Source = Field(default_factory=Source)
    schema_ref: str = Field(
        default="pipelines.schemas:DIGITS",
        description="module:attribute of a pipelines.schemas.ValidationSchema, or 'not_null'.",
    )
    start_date: str = Field(default="2026-01-01", description="First daily partition (YYYY-MM-DD).")
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

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not NAME.match(name):
            raise ValueError(f"dataset name {name!r} must match {NAME.pattern} (it becomes asset keys and folders)")
        return name

    @field_validator("start_date")
    @classmethod
    def _check_start(cls, start: str) -> str:
        date.fromisoformat(start)  # ValueError names the bad date
        return start

    def day_index(self, day: str) -> int:
        """Days since the first partition: numbers the generated sources' daily slices."""
        return (date.fromisoformat(day) - date.fromisoformat(self.start_date)).days


def registry_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("MDS_DATASETS") or DEFAULT_REGISTRY)


def load_registry(path: Path | None = None) -> list[DatasetSpec]:
    """The registry's datasets; a clear ``ConfigurationError`` naming the file for anything wrong in it."""
    path = path or registry_path()
    try:
        document = yaml.safe_load(path.read_text()) or {}
        specs = [DatasetSpec(**entry) for entry in document.get("datasets", [])]
    except (OSError, yaml.YAMLError, ValidationError, TypeError, AttributeError) as err:
        raise ConfigurationError(f"dataset registry {path}: {err}") from err
    names = [spec.name for spec in specs]
    if not specs or len(set(names)) != len(names):
        raise ConfigurationError(f"dataset registry {path}: needs at least one dataset and unique names, got {names}")
    return specs
