"""The Dagster instance's settings.

``pipelines/dagster.yaml``, shipped in the package, goes into a ``$DAGSTER_HOME`` that has none.

``python -m pipelines.instance HOME`` prepares a deployment's home. An existing ``dagster.yaml`` there
is the user's (storage, run coordinator, retention they chose), so it is never overwritten: the
settings the pipelines rely on that it lacks are named instead, for the user to merge. A checkout runs
Dagster with ``DAGSTER_HOME`` at the project root, whose own ``dagster.yaml`` keeps the state in
``.dagster_home/`` (docs/deployment.md).
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

import yaml

# What the pipelines need from the instance: one shard-set writer at a time (the file says why).
NEEDED = {("concurrency", "pools", "default_limit"): 1}


def packaged_settings() -> str:
    """The text of the instance settings shipped with the package."""
    return (files("pipelines") / "dagster.yaml").read_text()


def prepare_home(home: Path) -> list[str]:
    """Create ``home`` with the packaged ``dagster.yaml`` if it has none; else the needed settings it lacks."""
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        target.write_text(packaged_settings())
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


def notes(home: Path) -> list[str]:
    """What a user should know about ``home``'s instance settings, one line each."""
    return [
        f"note: kept your {home / 'dagster.yaml'}; it lacks `{setting}` (see pipelines/dagster.yaml in the "
        "package), so two runs could race to commit the same shard-set version"
        for setting in prepare_home(home)
    ]


def main() -> None:
    """Print on stderr a note for each setting the dagster.yaml of the instance folder given lacks."""
    for line in notes(Path(sys.argv[1]).resolve()):
        print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
