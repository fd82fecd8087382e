"""Where the pipelines keep their data when no resource setting names a place.

``$MDS_DATA_DIR``, else the user's data folder (``~/.local/share/mds-pipelines`` on Linux, as
platformdirs places it on each system). Never a folder beside the code: installed from a wheel, that
is ``site-packages``. ``make demo`` and ``make ui`` set ``MDS_DATA_DIR`` to the checkout's ``data/``.
The variable is read when a path is needed (a run), not when the code location loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "mds-pipelines"


def data_dir() -> Path:
    """The folder the warehouse, landing zone, shard sets and cache go under unless configured one by one."""
    configured = os.environ.get("MDS_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
