"""``mds check-order``: the same global batches on other worlds and resume points?"""

from __future__ import annotations

import sys

import click

from mds_core.cli.common import fail, say, show
from mds_core.cli.schedules import load_schedule, schedule_option, scheduled_work, stream_names
from mds_core.format.index import load_index
from mds_core.order.simulate import check_order
from mds_core.order.spec import OrderSpec
from mds_core.order.world import parse_world


@click.command("check-order")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--global-batch", "global_batch", type=int, required=True, help="Samples per step over all devices.")
@click.option(
    "--world",
    "worlds",
    multiple=True,
    default=("1x1", "1x2x2", "2x2x2"),
    show_default=True,
    help="NODESxRANKS[xWORKERS] to simulate; repeat the option. The first is the baseline.",
)
@click.option(
    "--resume",
    "resumes",
    multiple=True,
    type=float,
    default=(0.0, 0.5),
    show_default=True,
    help="Resume points as fractions of the epoch; repeat the option.",
)
@click.option(
    "--num-canonical-nodes", type=int, default=None, help="Pin it: the order depends on it (not with --schedule)."
)
@click.option("--shuffle/--no-shuffle", default=True, show_default=True)
@click.option("--shuffle-algo", default="py1e", show_default=True)
@click.option("--shuffle-seed", default=9176, show_default=True)
@click.option("--shuffle-block-size", type=int, default=None)
@click.option("--partition-algo", default="relaxed", show_default=True)
@click.option("--batching-method", default="random", show_default=True)
@click.option("--epoch", default=0, show_default=True)
@schedule_option
def check_order_command(
    paths: tuple[str, ...],
    global_batch: int,
    worlds: tuple[str, ...],
    resumes: tuple[float, ...],
    num_canonical_nodes: int | None,
    shuffle: bool,
    shuffle_algo: str,
    shuffle_seed: int,
    shuffle_block_size: int | None,
    partition_algo: str,
    batching_method: str,
    epoch: int,
    schedule: str | None,
) -> None:
    """Simulate the datasets at PATHS (one stream each) on several worlds and resume points.

    Reports whether every global batch holds the same samples as on the first world, and the first
    difference where not. Exits 1 on any difference.
    """
    if num_canonical_nodes is None and schedule is None:
        fail("--num-canonical-nodes is needed: the order depends on it (a --schedule's does not)")
    sizes = [[shard.samples for shard in load_index(f"{path}/index.json")] for path in paths]
    spec = OrderSpec(
        shard_sizes=sizes,
        shuffle=shuffle,
        shuffle_algo=shuffle_algo,
        shuffle_seed=shuffle_seed,
        num_canonical_nodes=num_canonical_nodes,
        shuffle_block_size=shuffle_block_size,
        partition_algo=partition_algo,
        batching_method=batching_method,
    )
    work_of = scheduled_work(load_schedule(schedule), stream_names(paths), spec) if schedule else None
    results = check_order(spec, [parse_world(w) for w in worlds], global_batch, epoch, resumes, work_of)
    for result in results:
        where = f"{result.world}, resumed at sample {result.resume_at}"
        if result.error:
            say(f"REFUSED  {where}: {result.error}")
        elif result.first_difference:
            batch, expected, got = result.first_difference
            say(f"DIFFERS  {where}: global batch {batch} has {show(got)} instead of {show(expected)}")
        else:
            say(f"same     {where}: {result.batches_compared} global batches")
    sys.exit(0 if all(r.ok for r in results) else 1)
