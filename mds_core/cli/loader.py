"""``mds check-loader``: stream a dataset with a real StreamingDataLoader and check what arrives."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TypedDict

import click

from mds_core.cli.common import fail, say, verdict
from mds_core.storage.urls import is_remote
from mds_core.streaming.version_sample import (
    DEFAULT_CHECK_BATCH_SIZE,
    DEFAULT_CHECK_WORKERS,
    DEFAULT_SAMPLE_ROWS,
    DEFAULT_SAMPLE_SECONDS,
    describe_subset,
)

if TYPE_CHECKING:
    from mds_core.streaming.loader_check import LoaderCheckReport


class _CommonArgs(TypedDict):
    """The arguments check_loader and check_version share."""

    batch_size: int
    num_workers: int
    min_samples_per_second: float
    allow_unsafe_types: bool
    cache_limit: str | None


@click.command("check-loader")
@click.argument("path")
@click.option("--version", type=int, default=None, help="A version of the shard set at PATH (a root).")
@click.option("--cache", default=None, help="Local cache for a remote PATH; default: a temporary directory.")
@click.option("--batch-size", default=DEFAULT_CHECK_BATCH_SIZE, show_default=True, help="Per-device batch size.")
@click.option("--workers", "num_workers", default=DEFAULT_CHECK_WORKERS, show_default=True, help="DataLoader workers.")
@click.option("--min-samples-per-second", default=0.0, show_default=True, help="Fail below this throughput.")
@click.option(
    "--sample",
    "bounded",
    is_flag=True,
    help="With --version: read the version's new shards in full and a seeded sample of the older "
    "ones, not every sample (implied by --sample-rows, --sample-seconds and --seed).",
)
@click.option(
    "--sample-rows",
    type=int,
    default=None,
    help=f"Rows of older shards to sample (whole shards); 0: the new shards only. [{DEFAULT_SAMPLE_ROWS}]",
)
@click.option(
    "--sample-seconds",
    type=float,
    default=None,
    help=f"Most seconds to spend downloading the sample. [{DEFAULT_SAMPLE_SECONDS:g}]",
)
@click.option("--seed", type=int, default=None, help="The sample's seed (drawn from seed and version). [0]")
@click.option("--cache-limit", default=None, help="Bytes the cache may hold, e.g. 2gb (also bounds the sample).")
@click.option("--allow-unsafe-types", is_flag=True, help="Read pkl columns (runs unpickling).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def check_loader_command(
    path: str,
    version: int | None,
    cache: str | None,
    batch_size: int,
    num_workers: int,
    min_samples_per_second: float,
    bounded: bool,
    sample_rows: int | None,
    sample_seconds: float | None,
    seed: int | None,
    cache_limit: str | None,
    allow_unsafe_types: bool,
    as_json: bool,
) -> None:
    """Stream the dataset at PATH as training does.

    Every sample exactly once, and a resume from a mid-epoch state dict continues the same order. Exits 1 when a check
    fails.

    PATH is a dataset directory, a URL, or (with --version) a versioned shard set's root. With
    --sample, only the version's new shards and a bounded sample of the rest are streamed: the
    daily check whose cost does not grow with the history.
    """
    bounded = bounded or any(value is not None for value in (sample_rows, sample_seconds, seed))
    common = _CommonArgs(
        batch_size=batch_size,
        num_workers=num_workers,
        min_samples_per_second=min_samples_per_second,
        allow_unsafe_types=allow_unsafe_types,
        cache_limit=cache_limit,
    )
    if bounded:
        report = _bounded(path, version, cache, sample_rows, sample_seconds, seed, common)
    else:
        from mds_core.streaming.loader_check import check_loader  # imports torch

        remote = path if version is not None or is_remote(path) else None
        report = check_loader(remote=remote, local=path if remote is None else cache, version=version, **common)
    _print(report, num_workers, as_json)
    sys.exit(0 if report.passed else 1)


def _bounded(
    path: str,
    version: int | None,
    cache: str | None,
    sample_rows: int | None,
    sample_seconds: float | None,
    seed: int | None,
    common: _CommonArgs,
) -> LoaderCheckReport:
    if version is None:
        fail(
            "--sample, --sample-rows, --sample-seconds and --seed need --version N (a version of the shard set at PATH)"
        )
    from mds_core.streaming.loader_check import check_version  # imports torch

    return check_version(
        path,
        version,
        local=cache,
        sample_rows=DEFAULT_SAMPLE_ROWS if sample_rows is None else sample_rows,
        sample_seconds=DEFAULT_SAMPLE_SECONDS if sample_seconds is None else sample_seconds,
        seed=seed or 0,
        **common,
    )


def _print(report: LoaderCheckReport, num_workers: int, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    say(
        f"{verdict(report.problems)}: {report.samples_streamed} samples streamed by {num_workers} worker(s) "
        f"({report.distinct} distinct, {report.samples_expected} expected), resumed at sample "
        f"{report.resumed_at_sample}: continuation {'matches' if report.continuation_matches else 'DIFFERS'}, "
        f"{report.samples_per_second:,.0f} samples/s"
    )
    if report.subset:
        say(describe_subset(report.subset))
    if report.telemetry:
        totals = report.telemetry["totals"]
        say(
            f"data time: waited {report.telemetry['wait_seconds']:.3f} s for batches (slowest "
            f"{report.telemetry['wait_max_seconds']:.3f} s), decoded for {totals['decode_seconds']:.3f} s, "
            f"downloaded {totals['shards_downloaded']} shard(s), {totals['bytes_downloaded']:,} bytes"
        )
