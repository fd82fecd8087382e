"""The Dagster instance's home: the project's ``deploy/dagster.yaml`` goes in only where there is none.

``make demo`` and ``make ui`` share ``$DAGSTER_HOME``. An existing ``dagster.yaml`` there is the
user's (storage, run coordinator, retention they chose), so it is never overwritten: the settings
the pipelines rely on that it lacks are named instead, for the user to merge.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

PROJECT_SETTINGS = Path(__file__).resolve().parents[1] / "deploy" / "dagster.yaml"
# What the pipelines need from the instance: one shard-set writer at a time (deploy/dagster.yaml says why).
NEEDED = {("concurrency", "pools", "default_limit"): 1}


def prepare_home(home: Path) -> list[str]:
    """Create ``home`` with the project's ``dagster.yaml`` if it has none; else the needed settings it lacks."""
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        shutil.copyfile(PROJECT_SETTINGS, target)
        return []
    settings = yaml.safe_load(target.read_text()) or {}
    missing = []
    for path, value in NEEDED.items():
        node = settings
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node != value:
            missing.append(f"{': '.join(path)}: {value}")
    return missing


def main() -> None:
    home = Path(sys.argv[1])
    for setting in prepare_home(home):
        print(
            f"note: kept your {home / 'dagster.yaml'}; it lacks `{setting}` (see {PROJECT_SETTINGS}), "
            "so two runs could race to commit the same shard-set version",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
