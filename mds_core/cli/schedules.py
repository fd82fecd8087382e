"""``--schedule`` for ``mds check-order`` and ``mds plan``.

A mixing schedule over the streams given, which are named after their folders (``.../web`` is ``web``), as
``Stream(name=...)`` names them in training.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

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
