"""A dataset registry file for tests that load the code location from the environment ($MDS_DATASETS)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def write_registry(path: Path, rows_per_day: int = 60) -> Path:
    """The package's datasets (pipelines/defs/<dataset>/defs.yaml: digits and synthetic) as a registry file,
    with the digits dataset at ``rows_per_day`` rows a day, written to ``path``; set ``MDS_DATASETS`` to it."""
    from pipelines.registry import packaged_datasets

    registry = {"datasets": [spec.model_dump(mode="json") for spec in packaged_datasets()]}
    [digits] = [entry for entry in registry["datasets"] if entry["name"] == "digits"]
    digits["source"] = {**digits.get("source", {}), "rows_per_day": rows_per_day}
    path.write_text(yaml.safe_dump(registry, sort_keys=False))
    return path
