"""``mds plan``: downloads, cache and data stalls of a training world, before it runs."""

from __future__ import annotations

import dataclasses
import json
import re

import click

from mds_core.cli.common import fail, say
from mds_core.cli.schedules import load_schedule, loader_order_options, schedule_option, stream_names
from mds_core.errors import MDSError
from mds_core.order.world import DEFAULT_WORLD, parse_world
from mds_core.plan import Environment, TrainingPlan, plan_training
from mds_core.plan.report import render_text, save_plot
from mds_core.plan.source import load_streams, probe
from mds_core.sizes import bytes_to_int

# A bare number is bytes; below this it is surely a size in another unit (``--cache-limit 5`` meaning 5 GB).
_LEAST_BARE_BYTES = 1 << 20


def _size(value: str | None, option: str) -> int | None:
    """``option``'s size in bytes: ``50gb``, ``512MiB`` (powers of 1024), or a bare byte count of 1 MiB or more."""
    if value is None:
        return None
    try:  # "64.0 MiB", as the report writes sizes, is "64mb": both are powers of 1024
        size = bytes_to_int(re.sub(r"(?i)([kmgtp])ib$", r"\1b", value.strip()))
    except MDSError as err:
        fail(f"{option}: {err}")
    if re.fullmatch(r"\s*[\d.]+\s*", value) and size < _LEAST_BARE_BYTES:
        fail(
            f"{option} {value.strip()}: a number without a unit is bytes, and {size:,} byte(s) cannot be meant; "
            f"give the unit, e.g. {option} {value.strip()}gb (kb, mb, gb, tb: powers of 1024)"
        )
    return size


@click.command("plan")
@click.argument("sources", nargs=-1, required=True)
@click.option("--world", default=DEFAULT_WORLD, show_default=True, help="NODESxRANKS_PER_NODExWORKERS_PER_RANK.")
@click.option("--batch-size", type=int, required=True, help="Per-device batch size (the DataLoader's).")
@click.option("--epochs", type=int, default=1, show_default=True)
@loader_order_options
@click.option(
    "--predownload", type=int, default=None, help="Samples per worker fetched ahead (default 8 x batch size)."
)
@click.option(
    "--cache-limit", default=None, help="Per node, e.g. 50gb or 512mb (default: none); a bare number is bytes."
)
@click.option("--keep-zip", is_flag=True, help="Compressed shards stay cached next to their raw files.")
@click.option("--bandwidth", default=None, help="Per node, bytes per second, e.g. 1.2gb.")
@click.option("--latency", type=float, default=None, help="Seconds from request to first byte.")
@click.option("--consume-time", type=float, default=None, help="Training seconds per sample on one rank.")
@click.option(
    "--probe",
    "run_probe",
    is_flag=True,
    help="Measure bandwidth, latency and decode time against the "
    "first SOURCE (downloads up to 64 MiB from this machine; pkl values are timed as bytes, never unpickled).",
)
@schedule_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write cache and downloads over the epoch to this image (PNG, SVG, PDF); needs matplotlib.",
)
def plan_command(
    sources: tuple[str, ...],
    world: str,
    batch_size: int,
    epochs: int,
    shuffle: bool,
    shuffle_algo: str,
    shuffle_seed: int,
    shuffle_block_size: int | None,
    num_canonical_nodes: int | None,
    partition_algo: str,
    batching_method: str,
    predownload: int | None,
    cache_limit: str | None,
    keep_zip: bool,
    bandwidth: str | None,
    latency: float | None,
    consume_time: float | None,
    run_probe: bool,
    schedule: str | None,
    as_json: bool,
    plot: str | None,
) -> None:
    """Plan training on the datasets at SOURCES (paths or URLs, one stream each).

    Their indexes are read, their shard files listed but never read.

    Downloads and cache per node are exact without a cache limit or at the recommended one: they
    follow the loader's real per-rank order. Repeated downloads under a smaller limit are a
    worst-case estimate. Time to first batch, throughput and waiting are modelled from --bandwidth,
    --latency and --consume-time (or --probe, whose measurements the report shows). The order is
    StreamingDataset's with the same options: unshuffled unless --shuffle.
    """
    _check_counts(batch_size, epochs)
    parsed_world = parse_world(world, zero_workers=False)
    limit = _size(cache_limit, "--cache-limit")
    link = _size(bandwidth, "--bandwidth")
    measured = probe(sources[0]) if run_probe else None
    plan = plan_training(
        load_streams(list(sources)),
        parsed_world,
        batch_size,
        epochs=epochs,
        predownload=predownload,
        cache_limit=limit,
        keep_zip=keep_zip,
        environment=_environment(measured, link, latency, consume_time),
        shuffle=shuffle,
        shuffle_algo=shuffle_algo,
        shuffle_seed=shuffle_seed,
        shuffle_block_size=shuffle_block_size,
        num_canonical_nodes=num_canonical_nodes,
        partition_algo=partition_algo,
        batching_method=batching_method,
        schedule=load_schedule(schedule) if schedule else None,
        stream_names=stream_names(sources),
    )
    if measured is not None:  # the report shows what the model's figures came from
        plan.settings["probe"] = dataclasses.asdict(measured)
    _output(plan, plot, as_json)


def _check_counts(batch_size: int, epochs: int) -> None:
    """Refuse a batch size or an epoch count below one, naming the option."""
    if batch_size < 1:
        fail(
            f"--batch-size must be a positive integer (the per-device batch size, the same as the DataLoader's), "
            f"got {batch_size}"
        )
    if epochs < 1:
        fail(f"--epochs must be at least 1, got {epochs}")


def _environment(
    measured: Environment | None, link: int | None, latency: float | None, consume_time: float | None
) -> Environment:
    """The hardware to model: the options given, and for the rest what ``--probe`` measured (or the defaults)."""
    found = measured if measured is not None else Environment()
    return Environment(
        bandwidth=link or found.bandwidth,
        latency=latency if latency is not None else found.latency,
        consume_seconds=consume_time,
        decode_seconds=found.decode_seconds,
        startup_seconds=found.startup_seconds,
    )


def _output(plan: TrainingPlan, plot: str | None, as_json: bool) -> None:
    """Write the plot if one is asked for, then print the plan as JSON or as tables."""
    if plot:
        save_plot(plan, plot)
    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=2))
    else:
        say(render_text(plan))
