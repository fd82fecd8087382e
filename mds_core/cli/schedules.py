"""``--schedule`` for ``mds check-order``, ``mds plan`` and ``mds which``, and the loader's order options of the last two.

A mixing schedule over the streams given, which are named after their folders (``.../web`` is ``web``), as
``Stream(name=...)`` names them in training.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click
import numpy as np
from numpy.typing import NDArray

from mds_core.cli.common import fail
from mds_core.errors import MDSError
from mds_core.order.schedule import Schedule
from mds_core.order.simulate import WorkOf
from mds_core.order.spec import OrderSpec
from mds_core.order.world import World
from mds_core.streaming.scheduled import ScheduledEpochs

schedule_option = click.option(
    "--schedule",
    default=None,
    help="A mixing schedule: its JSON, or a file holding it; streams are named by their folders' names.",
)


# StreamingDataset's order options with its defaults, for the commands that predict a loader (plan, which).
_LOADER_ORDER_OPTIONS = (
    click.option(
        "--shuffle/--no-shuffle",
        default=False,
        show_default=True,
        help="As StreamingDataset's shuffle (off by default).",
    ),
    click.option("--shuffle-algo", default="py1e", show_default=True),
    click.option("--shuffle-seed", default=9176, show_default=True),
    click.option("--shuffle-block-size", type=int, default=None, help="Default: the loader's, for this world."),
    click.option("--num-canonical-nodes", type=int, default=None, help="Default: the loader's, for this world."),
    click.option("--partition-algo", default="relaxed", show_default=True),
    click.option("--batching-method", default="random", show_default=True),
)


def loader_order_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add StreamingDataset's order options to ``command``, in that order in its help."""
    for option in reversed(_LOADER_ORDER_OPTIONS):
        command = option(command)
    return command


def load_schedule(text: str) -> Schedule:
    """The schedule in ``text``: its JSON, or the path of a file that holds it."""
    try:
        if os.path.isfile(text):
            with open(text, encoding="utf-8") as handle:
                text = handle.read()
        return Schedule.from_json(text)
    except (MDSError, OSError) as err:
        fail(f"--schedule: {err}")


def stream_names(sources: Sequence[str]) -> list[str]:
    """Each source's name: the last part of its path or URL."""
    return [os.path.basename(source.rstrip("/")) for source in sources]


def scheduled_work(schedule: Schedule, names: Sequence[str], spec: OrderSpec) -> WorkOf:
    """The work arrays of the scheduled run, as ``check_order`` and ``plan_training`` take them."""

    def work_of(world: World, batch_size: int, epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
        epochs = ScheduledEpochs(schedule, names, spec, world, batch_size, spec.epoch_size)
        return epochs.work(world, epoch, sample_in_epoch)

    return work_of
