"""The ``mds`` command: inspect, verify and peek into MDS datasets."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import numpy as np

from mds_core.errors import MDSError
from mds_core.local import LocalDataset
from mds_core.verify import summarize, verify_dataset


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
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def inspect(path: str, as_json: bool) -> None:
    """Columns, shards, samples and sizes of the dataset at PATH."""
    summary = _or_exit(summarize, path)
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
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--decode", is_flag=True, help="Also decode every value of every sample.")
@click.option("--allow-unsafe-types", is_flag=True, help="Decode pkl columns too (runs unpickling).")
def verify(path: str, decode: bool, allow_unsafe_types: bool) -> None:
    """Check the index, every shard's structure and every recorded hash. Exits 1 on any problem."""
    report = verify_dataset(path, decode=decode, allow_unsafe_types=allow_unsafe_types)
    for problem in report.problems:
        click.echo(f"FAIL {problem}", err=True)
    status = "OK" if report.ok else f"FAILED ({len(report.problems)} problems)"
    click.echo(
        f"{status}: {report.shards} shards, {report.files_checked} files, "
        f"{report.hashes_checked} hashes, {report.samples_checked} samples checked in {path}"
    )
    sys.exit(0 if report.ok else 1)


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("-n", "--num", default=5, show_default=True, help="How many samples to print.")
@click.option("--allow-unsafe-types", is_flag=True, help="Read pkl columns (runs unpickling).")
def head(path: str, num: int, allow_unsafe_types: bool) -> None:
    """Print the first samples of the dataset at PATH."""
    dataset = _or_exit(LocalDataset, path, allow_unsafe_types=allow_unsafe_types)
    with dataset:
        for index in range(min(num, len(dataset))):
            sample = _or_exit(dataset.get_item, index)
            click.echo(f"[{index}]")
            for name, value in sample.items():
                click.echo(f"  {name}: {_show(value)}")


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


def _or_exit(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Turn an MDSError into a one-line message and exit status 2 instead of a traceback."""
    try:
        return func(*args, **kwargs)
    except MDSError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
