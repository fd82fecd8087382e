"""The ``mds`` command: inspect, verify and read MDS datasets, check orders and loaders, manage versions.

One module per family of subcommands; ``common`` holds what they share.
"""

from __future__ import annotations

import click

from mds_core.cli.common import CommandGroup
from mds_core.cli.datasets import head, inspect, verify
from mds_core.cli.loader import check_loader_command
from mds_core.cli.order import check_order_command
from mds_core.cli.plan import plan_command
from mds_core.cli.versions import versions
from mds_core.cli.which import which_command


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mds-pipelines")
def main() -> None:
    """Inspect, verify and read MDS (Mosaic Data Shard) datasets.

    Check sample orders and loaders; manage the versions of shard sets; plan a training run; find which samples
    a step read.
    """


for command in (
    inspect,
    verify,
    head,
    check_order_command,
    check_loader_command,
    plan_command,
    versions,
    which_command,
):
    main.add_command(command)
