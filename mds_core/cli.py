"""The ``mds`` command: inspect, verify and peek into MDS datasets."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator

import click
import numpy as np

from mds_core.errors import MDSError
from mds_core.format.index import INDEX_BASENAME, parse_index
from mds_core.streaming.local import LocalDataset
from mds_core.storage.remote import open_store
from mds_core.storage.urls import is_remote
from mds_core.storage.shard_cache import ShardCache
from mds_core.format.verify import summarize, verify_dataset


def _human(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "-"
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(num_bytes)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mds-pipelines")
def main() -> None:
    """Inspect, verify and read MDS (Mosaic Data Shard) datasets."""


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def inspect(path: str, as_json: bool) -> None:
    """Columns, shards, samples and sizes of the dataset at PATH (a directory or a URL)."""
    with _local_copy(path, shards=False) as local:
        summary = _or_exit(summarize, local)
    summary.root = path
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
        return
    click.echo(f"dataset      {summary.root}")
    click.echo(f"samples      {summary.samples}")
    click.echo(f"shards       {summary.shards}")
    click.echo(f"raw bytes    {summary.raw_bytes} ({_human(summary.raw_bytes)})")
    if summary.zip_bytes is not None:
        click.echo(f"compressed   {summary.zip_bytes} ({_human(summary.zip_bytes)}) with {', '.join(summary.compression)}")
        click.echo(f"ratio        {summary.ratio:.2f}x")
    else:
        click.echo("compressed   no")
    click.echo(f"hashes       {', '.join(summary.hashes) or 'none'}")
    click.echo("columns")
    width = max((len(name) for name in summary.columns), default=0)
    for name, encoding in summary.columns.items():
        click.echo(f"  {name:<{width}}  {encoding}")


@main.command()
@click.argument("path")
@click.option("--decode", is_flag=True, help="Also decode every value of every sample.")
@click.option("--allow-unsafe-types", is_flag=True, help="Decode pkl columns too (runs unpickling).")
def verify(path: str, decode: bool, allow_unsafe_types: bool) -> None:
    """Check the index, every shard's structure and every recorded hash. Exits 1 on any problem.

    A URL is downloaded to a temporary directory first.
    """
    with _local_copy(path, shards=True) as local:
        report = verify_dataset(local, decode=decode, allow_unsafe_types=allow_unsafe_types)
    for problem in report.problems:
        click.echo(f"FAIL {problem}", err=True)
    status = "OK" if report.ok else f"FAILED ({len(report.problems)} problems)"
    click.echo(
        f"{status}: {report.shards} shards, {report.files_checked} files, "
        f"{report.hashes_checked} hashes, {report.samples_checked} samples checked in {path}"
    )
    sys.exit(0 if report.ok else 1)


@main.command()
@click.argument("path")
@click.option("-n", "--num", default=5, show_default=True, help="How many samples to print.")
@click.option("--allow-unsafe-types", is_flag=True, help="Read pkl columns (runs unpickling).")
def head(path: str, num: int, allow_unsafe_types: bool) -> None:
    """Print the first samples of the dataset at PATH (a directory or a URL)."""
    with _local_copy(path, shards=False) as local:
        dataset = _or_exit(LocalDataset, local, allow_unsafe_types=allow_unsafe_types)
        if is_remote(path):
            dataset.shard_cache = ShardCache(open_store(path), local, dataset.shards)  # only what is shown
        _print_head(dataset, num)


def _print_head(dataset: LocalDataset, num: int) -> None:
    with dataset:
        for index in range(min(num, len(dataset))):
            sample = _or_exit(dataset.get_item, index)
            click.echo(f"[{index}]")
            for name, value in sample.items():
                click.echo(f"  {name}: {_show(value)}")


@contextmanager
def _local_copy(path: str, shards: bool) -> Iterator[str]:
    """A local directory for PATH: itself, or for a URL a temporary copy of its index (and shards)."""
    if not is_remote(path):
        if not os.path.isdir(path):
            _fail(f"{path}: no such dataset directory")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="mds-cli-") as local:
        store = open_store(path)
        _or_exit(store.download, INDEX_BASENAME, os.path.join(local, INDEX_BASENAME))
        if shards:
            index = _or_exit(parse_index, open(os.path.join(local, INDEX_BASENAME), "rb").read(), path)
            for shard in index:
                info = shard.zip_data or shard.raw_data  # a compressed shard exists remotely only as its zip
                _or_exit(store.download, info.basename, os.path.join(local, info.basename))
        yield local


@main.command("check-order")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--global-batch", "global_batch", type=int, required=True, help="Samples per step over all devices.")
@click.option("--world", "worlds", multiple=True, default=("1x1", "1x2x2", "2x2x2"), show_default=True,
              help="NODESxRANKS[xWORKERS] to simulate; repeat the option. The first is the baseline.")
@click.option("--resume", "resumes", multiple=True, type=float, default=(0.0, 0.5), show_default=True,
              help="Resume points as fractions of the epoch; repeat the option.")
@click.option("--num-canonical-nodes", type=int, required=True, help="Pin it: the order depends on it.")
@click.option("--shuffle/--no-shuffle", default=True, show_default=True)
@click.option("--shuffle-algo", default="py1e", show_default=True)
@click.option("--shuffle-seed", default=9176, show_default=True)
@click.option("--shuffle-block-size", type=int, default=None)
@click.option("--partition-algo", default="relaxed", show_default=True)
@click.option("--batching-method", default="random", show_default=True)
@click.option("--epoch", default=0, show_default=True)
def check_order_command(paths: tuple[str, ...], global_batch: int, worlds: tuple[str, ...], resumes: tuple[float, ...],
                        num_canonical_nodes: int, shuffle: bool, shuffle_algo: str, shuffle_seed: int,
                        shuffle_block_size: int | None, partition_algo: str, batching_method: str, epoch: int) -> None:
    """Simulate the datasets at PATHS (one stream each) on several worlds and resume points.

    Reports whether every global batch holds the same samples as on the first world, and the first
    difference where not. Exits 1 on any difference.
    """
    from mds_core.format.index import load_index
    from mds_core.order.simulate import check_order
    from mds_core.order.world import parse_world
    from mds_core.order.spec import OrderSpec

    def run() -> list:
        sizes = [[shard.samples for shard in load_index(f"{path}/index.json")] for path in paths]
        spec = OrderSpec(shard_sizes=sizes, shuffle=shuffle, shuffle_algo=shuffle_algo, shuffle_seed=shuffle_seed,
                         num_canonical_nodes=num_canonical_nodes, shuffle_block_size=shuffle_block_size,
                         partition_algo=partition_algo, batching_method=batching_method)
        return check_order(spec, [parse_world(w) for w in worlds], global_batch, epoch, resumes)

    results = _or_exit(run)
    for result in results:
        where = f"{result.world}, resumed at sample {result.resume_at}"
        if result.error:
            click.echo(f"REFUSED  {where}: {result.error}")
        elif result.first_difference:
            batch, expected, got = result.first_difference
            click.echo(f"DIFFERS  {where}: global batch {batch} has {_show(got)} instead of {_show(expected)}")
        else:
            click.echo(f"same     {where}: {result.batches_compared} global batches")
    sys.exit(0 if all(r.ok for r in results) else 1)


def _show(value: Any, limit: int = 80) -> str:
    """A one-line, bounded rendering of a sample value."""
    if isinstance(value, np.ndarray):
        body = np.array2string(value.ravel()[:8], separator=", ", threshold=8, max_line_width=1 << 20)
        more = ", ..." if value.size > 8 else ""
        return f"ndarray {value.dtype} {value.shape} {body[:-1]}{more}]"
    if hasattr(value, "mode") and hasattr(value, "size") and hasattr(value, "getpixel"):
        return f"image {value.mode} {value.size[0]}x{value.size[1]}"
    if isinstance(value, list) and value and hasattr(value[0], "getpixel"):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(value) if hasattr(value, '__len__') else '?'} long)"


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _or_exit(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Turn an MDSError into a one-line message and exit status 2 instead of a traceback."""
    try:
        return func(*args, **kwargs)
    except MDSError as err:
        _fail(str(err))


if __name__ == "__main__":
    main()


@main.group()
def versions() -> None:
    """Versioned shard sets: list, show, diff and vacuum the versions under ROOT (a path or URL)."""


def _shard_set(root: str) -> Any:
    from mds_core.versions import ShardSet

    return _or_exit(ShardSet, root)


def _emit(obj: Any, as_json: bool, lines: list[str]) -> None:
    click.echo(json.dumps(obj, indent=2, default=str) if as_json else "\n".join(lines))


@versions.command("list")
@click.argument("root")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_list(root: str, as_json: bool) -> None:
    """Every committed version, oldest first; * marks the published one."""
    shard_set = _shard_set(root)
    found, published = _or_exit(shard_set.versions), _or_exit(shard_set.published)
    lines = [f"{'*' if v.version == published else ' '} {v.version:>4}  {v.created[:19]}  {v.mode:<9} "
             f"{v.rows:>10} rows  {v.shards:>6} shards  {_human(v.stored_bytes):>10}  parent {v.parent}"
             for v in found] or [f"no versions in {root}"]
    _emit({"published": published, "versions": [v.to_json() for v in found]}, as_json, lines)


@versions.command("show")
@click.argument("root")
@click.argument("version", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_show(root: str, version: int, as_json: bool) -> None:
    """The manifest of one version: rows, columns, writer settings, fingerprint, lineage."""
    info = _or_exit(_shard_set(root).version, version)
    _emit(info.to_json(), as_json, [f"{key:<13} {value}" for key, value in info.to_json().items()])


@versions.command("diff")
@click.argument("root")
@click.argument("old", type=int)
@click.argument("new", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_diff(root: str, old: int, new: int, as_json: bool) -> None:
    """Shards and rows added and removed from version OLD to version NEW."""
    diff = _or_exit(_shard_set(root).diff, old, new)
    lines = [f"{old} -> {new}: +{len(diff.added_shards)} shards (+{diff.added_rows} rows), "
             f"-{len(diff.removed_shards)} shards (-{diff.removed_rows} rows)"]
    lines += [f"+ {name}" for name in diff.added_shards] + [f"- {name}" for name in diff.removed_shards]
    _emit(diff.to_json(), as_json, lines)


@versions.command("vacuum")
@click.argument("root")
@click.option("--keep-last", type=int, help="Keep the newest K versions (and the published one).")
@click.option("--newer-than", type=click.DateTime(), help="Keep versions created after this UTC time.")
@click.option("--grace-hours", type=float, default=1.0, show_default=True,
              help="Leave unfinished commits younger than this alone.")
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def versions_vacuum(root: str, keep_last: int | None, newer_than: Any, grace_hours: float, dry_run: bool,
                    as_json: bool) -> None:
    """Delete versions outside the retention and every file no kept version needs."""
    import datetime as dt

    when = newer_than.replace(tzinfo=dt.timezone.utc) if newer_than else None
    report = _or_exit(_shard_set(root).vacuum, keep_last=keep_last, newer_than=when,
                      grace=dt.timedelta(hours=grace_hours), dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    lines = [f"kept versions {report.kept_versions}; removed versions {report.removed_versions}; "
             f"{verb} {len(report.removed_files)} files"] + [f"  {name}" for name in report.removed_files]
    _emit(report.to_json(), as_json, lines)
