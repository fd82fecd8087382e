"""``python -m mds_core.cli``: the same as the ``mds`` command."""

from mds_core.cli import main

main()
