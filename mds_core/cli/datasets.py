"""``mds inspect``, ``mds verify`` and ``mds head``: look into one dataset (a directory or a URL)."""

from __future__ import annotations

import json
import sys

import click

from mds_core.cli.common import local_copy, say, show, show_text, verdict
from mds_core.format.verify import summarize, verify_dataset
from mds_core.sizes import format_bytes
from mds_core.storage.remote import open_store
from mds_core.storage.shard_cache import ShardCache
from mds_core.storage.urls import is_remote
from mds_core.streaming.local import LocalDataset


@click.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def inspect(path: str, as_json: bool) -> None:
    """Columns, shards, samples and sizes of the dataset at PATH (a directory or a URL)."""
    with local_copy(path, shards=False) as local:
        summary = summarize(local)
    summary.root = path
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
        return
    say(f"dataset      {summary.root}")
    say(f"samples      {summary.samples}")
    say(f"shards       {summary.shards}")
    say(f"raw bytes    {summary.raw_bytes} ({format_bytes(summary.raw_bytes)})")
    if summary.zip_bytes is not None:
        say(
            f"compressed   {summary.zip_bytes} ({format_bytes(summary.zip_bytes)}) with {', '.join(summary.compression)}"
        )
        say(f"ratio        {summary.ratio:.2f}x")
    else:
        say("compressed   no")
    say(f"hashes       {', '.join(summary.hashes) or 'none'}")
    say("columns")
    names = {show_text(name): show_text(encoding) for name, encoding in summary.columns.items()}
    width = max((len(name) for name in names), default=0)
    for name, encoding in names.items():
        say(f"  {name:<{width}}  {encoding}")


@click.command()
@click.argument("path")
@click.option("--decode", is_flag=True, help="Also decode every value of every sample.")
@click.option("--allow-unsafe-types", is_flag=True, help="Decode pkl columns too (runs unpickling).")
def verify(path: str, decode: bool, allow_unsafe_types: bool) -> None:
    """Check the index, every shard's structure and every recorded hash. Exits 1 on any problem.

    A URL is downloaded to a temporary directory first.
    """
    with local_copy(path, shards=True) as local:
        report = verify_dataset(local, decode=decode, allow_unsafe_types=allow_unsafe_types)
    if local != path:  # a URL's temporary copy: name the files where they are
        report.problems = [problem.replace(local, path.rstrip("/")) for problem in report.problems]
    if report.samples_not_decoded:
        say(f"{report.samples_not_decoded} samples not decoded (pkl columns; --allow-unsafe-types decodes them)")
    status = verdict(report.problems)  # the problems first, the summary last
    say(
        f"{status}: {report.shards} shards, {report.files_checked} files, "
        f"{report.hashes_checked} hashes, {report.samples_checked} samples checked in {path}"
    )
    sys.exit(0 if report.ok else 1)


@click.command()
@click.argument("path")
@click.option("-n", "--num", default=5, show_default=True, help="How many samples to print.")
@click.option("--allow-unsafe-types", is_flag=True, help="Read pkl columns (runs unpickling).")
def head(path: str, num: int, allow_unsafe_types: bool) -> None:
    """Print the first samples of the dataset at PATH (a directory or a URL)."""
    with local_copy(path, shards=False) as local:
        dataset = LocalDataset(local, allow_unsafe_types=allow_unsafe_types)
        if is_remote(path):
            dataset.shard_cache = ShardCache(open_store(path), local, dataset.shards)  # only what is shown
        _print_head(dataset, num)


def _print_head(dataset: LocalDataset, num: int) -> None:
    with dataset:
        for index in range(min(num, len(dataset))):
            sample = dataset.get_item(index)
            say(f"[{index}]")
            for name, value in sample.items():
                say(f"  {name}: {show(value)}")
