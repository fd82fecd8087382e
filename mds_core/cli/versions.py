"""``mds versions list|show|diff|vacuum|publish|rollback``: versioned shard sets under ROOT (a path or URL)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import click

from mds_core.cli.common import emit, say
from mds_core.sizes import format_bytes
from mds_core.versions import ShardSet


@click.group()
def versions() -> None:
    """Versioned shard sets: list, show, diff, publish, roll back and vacuum the versions under ROOT (a path or URL)."""


def _shard_set(root: str) -> ShardSet:
    return ShardSet(root)


@versions.command("list")
@click.argument("root")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_list(root: str, as_json: bool) -> None:
    """Every committed version, oldest first; * marks the published one."""
    shard_set = _shard_set(root)
    found, published = shard_set.versions(), shard_set.published()
    lines = [
        f"{'*' if v.version == published else ' '} {v.version:>4}  {v.created[:19]}  {v.mode:<9} "
        f"{v.rows:>10} rows  {v.shards:>6} shards  {format_bytes(v.stored_bytes):>10}  parent {_shown(v.parent)}"
        for v in found
    ] or [f"no versions in {root}"]
    emit({"published": published, "versions": [v.to_json() for v in found]}, as_json, lines)


@versions.command("show")
@click.argument("root")
@click.argument("version", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versionsshow(root: str, version: int, as_json: bool) -> None:
    """The manifest of one version: rows, columns, writer settings, fingerprint, lineage."""
    info = _shard_set(root).version(version)
    emit(info.to_json(), as_json, manifest_lines(info.to_json()))


SHOWN_CHARACTERS = 100  # a longer value is cut short in `show` (--json prints it whole)


def manifest_lines(manifest: dict[str, Any]) -> list[str]:
    """A manifest for people.

    ``field  value`` lines; a mapping as its name, then an indented ``key: value`` line per entry (``partitions``: how
    many shards each key has); sizes in bytes and units.
    """
    lines = []
    for key, value in manifest.items():
        if key == "partitions":
            value = {part: f"{len(shards)} shard(s)" for part, shards in value.items()}
        if isinstance(value, dict):
            lines.append(key if value else f"{key:<13} none")
            lines += [f"  {name}: {_shown(item)}" for name, item in value.items()]
        elif key.endswith("_bytes") and isinstance(value, int):
            lines.append(f"{key:<13} {value:,} ({format_bytes(value)})")
        else:
            lines.append(f"{key:<13} {_shown(value)}")
    return lines


def _shown(value: Any) -> str:
    """One value on one line.

    ``none`` for None or nothing, a list comma-separated, JSON for anything nested; cut short past ``SHOWN_CHARACTERS``
    with the full length said.
    """
    if value is None:
        text = "none"
    elif isinstance(value, list | tuple):
        text = ", ".join(_shown(item) for item in value) or "none"
    elif isinstance(value, dict):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    if len(text) > SHOWN_CHARACTERS:
        text = f"{text[: SHOWN_CHARACTERS - 3]}... ({len(text):,} characters; --json prints all)"
    return text


@versions.command("diff")
@click.argument("root")
@click.argument("old", type=int)
@click.argument("new", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_diff(root: str, old: int, new: int, as_json: bool) -> None:
    """Shards and rows added and removed from version OLD to version NEW."""
    diff = _shard_set(root).diff(old, new)
    lines = [
        f"{old} -> {new}: +{len(diff.added_shards)} shards (+{diff.added_rows} rows), "
        f"-{len(diff.removed_shards)} shards (-{diff.removed_rows} rows)"
    ]
    lines += [f"+ {name}" for name in diff.added_shards] + [f"- {name}" for name in diff.removed_shards]
    emit(diff.to_json(), as_json, lines)


@versions.command("vacuum")
@click.argument("root")
@click.option("--keep-last", type=int, help="Keep the newest K versions (and the published one).")
@click.option("--newer-than", type=click.DateTime(), help="Keep versions created after this UTC time.")
@click.option(
    "--grace-hours",
    type=float,
    default=1.0,
    show_default=True,
    help="Leave unfinished commits younger than this alone.",
)
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
@click.option("--force", is_flag=True, help="Vacuum a root that has no version yet (an unfinished first commit).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_vacuum(
    root: str, keep_last: int | None, newer_than: Any, grace_hours: float, dry_run: bool, force: bool, as_json: bool
) -> None:
    """Delete versions outside the retention and every file of ROOT's data/ and _versions/ no kept version needs.

    ROOT must be a shard set (a folder with version manifests in _versions/); anything else is refused.
    """
    when = newer_than.replace(tzinfo=dt.UTC) if newer_than else None
    report = _shard_set(root).vacuum(
        keep_last=keep_last, newer_than=when, grace=dt.timedelta(hours=grace_hours), dry_run=dry_run, force=force
    )
    verb = "would delete" if dry_run else "deleted"
    lines = [
        f"{root}: kept versions {report.kept_versions}; removed versions {report.removed_versions}; "
        f"{verb} {len(report.removed_files)} files"
    ] + [f"  {name}" for name in report.removed_files]
    emit(report.to_json(), as_json, lines)


@versions.command("publish")
@click.argument("root")
@click.argument("version", type=int)
def versions_publish(root: str, version: int) -> None:
    """Point ROOT's index.json (what training reads by default) at VERSION: publish it, or roll back to it."""
    shard_set = _shard_set(root)
    before = shard_set.published()
    shard_set.publish(version)
    say(f"published version {version} of {root} (was {before if before is not None else 'none'})")


@versions.command("rollback")
@click.argument("root")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_rollback(root: str, as_json: bool) -> None:
    """Publish again the version published before the current one (versions vacuumed since are skipped)."""
    shard_set = _shard_set(root)
    before = shard_set.published()
    number = shard_set.rollback()
    emit(
        {"root": root, "published": number, "was": before},
        as_json,
        [f"rolled back {root} to version {number} (was {before})"],
    )
