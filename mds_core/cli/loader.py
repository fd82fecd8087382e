"""``mds check-loader``: stream a dataset with a real StreamingDataLoader and check what arrives."""

from __future__ import annotations

import json
import sys

import click

from mds_core.cli.common import or_exit
from mds_core.storage.urls import is_remote


@click.command("check-loader")
@click.argument("path")
@click.option("--version", type=int, default=None, help="A version of the shard set at PATH (a root).")
@click.option("--cache", default=None, help="Local cache for a remote PATH; default: a temporary directory.")
@click.option("--batch-size", default=16, show_default=True, help="Per-device batch size.")
@click.option("--workers", "num_workers", default=2, show_default=True, help="DataLoader workers.")
@click.option("--min-samples-per-second", default=0.0, show_default=True, help="Fail below this throughput.")
@click.option("--allow-unsafe-types", is_flag=True, help="Read pkl columns (runs unpickling).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def check_loader_command(path: str, version: int | None, cache: str | None, batch_size: int, num_workers: int,
                         min_samples_per_second: float, allow_unsafe_types: bool, as_json: bool) -> None:
    """Stream the dataset at PATH as training does: every sample exactly once, and a resume from a
    mid-epoch state dict continues the same order. Exits 1 when a check fails.

    PATH is a dataset directory, a URL, or (with --version) a versioned shard set's root.
    """
    from mds_core.streaming.loader_check import check_loader  # imports torch

    remote = path if version is not None or is_remote(path) else None
    report = or_exit(check_loader, remote=remote, local=path if remote is None else cache, version=version,
                     batch_size=batch_size, num_workers=num_workers, min_samples_per_second=min_samples_per_second,
                     allow_unsafe_types=allow_unsafe_types)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        verdict = "OK" if report.passed else f"FAILED ({len(report.problems)} problems)"
        click.echo(f"{verdict}: {report.samples_streamed} samples streamed by {num_workers} worker(s) "
                   f"({report.distinct} distinct, {report.samples_expected} expected), resumed at sample "
                   f"{report.resumed_at_sample}: continuation {'matches' if report.continuation_matches else 'DIFFERS'}, "
                   f"{report.samples_per_second:,.0f} samples/s")
        if report.telemetry:
            totals = report.telemetry["totals"]
            click.echo(f"data time: waited {report.telemetry['wait_seconds']:.3f} s for batches (slowest "
                       f"{report.telemetry['wait_max_seconds']:.3f} s), decoded for {totals['decode_seconds']:.3f} s, "
                       f"downloaded {totals['shards_downloaded']} shard(s), {totals['bytes_downloaded']:,} bytes")
        for problem in report.problems:
            click.echo(f"FAIL {problem}", err=True)
    sys.exit(0 if report.passed else 1)
