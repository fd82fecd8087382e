"""The soak's writer: commits (and publishes) a new version to the shard set every few seconds.

Usage: python -m tests.soak.writer CONFIG_JSON

It appends ``writer_samples`` samples per version until the file ``stop`` exists, and rewrites
``writer.json`` (versions committed, errors) after each attempt. The readers read one pinned version,
so these commits change what ``index.json`` and ``_versions/`` hold under them, never their epoch.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from mds_core import MDSWriter
from mds_core.versions import ShardSet

COLUMNS = {"id": "int", "payload": "bytes"}
FIRST_WRITER_ID = 10_000_000  # far above the readers' ids, so a mix-up would show


def main() -> None:
    config: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text())
    shard_set = ShardSet(config["root"], retry=config["download_retry"])
    stop, status_path = Path(config["stop"]), Path(config["out"]) / "writer.json"
    rng = np.random.default_rng(config["seed"] + 1)  # not the dataset's samples
    status: dict[str, Any] = {"commits": 0, "errors": 0, "last_error": None, "last_version": None}
    next_id = FIRST_WRITER_ID
    while not stop.exists():
        try:
            with (
                shard_set.transaction("append") as tx,
                MDSWriter(
                    out=tx.out, columns=COLUMNS, size_limit=config["shard_bytes"], retry=config["download_retry"]
                ) as writer,
            ):
                for _ in range(config["writer_samples"]):
                    writer.write({"id": next_id, "payload": rng.bytes(config["sample_bytes"])})
                    next_id += 1
            status["commits"] += 1
            status["last_version"] = tx.version.version if tx.version else None
        except Exception:  # counted and reported: the soak fails on any writer error
            status["errors"] += 1
            status["last_error"] = traceback.format_exc()[-2000:]
        status_path.write_text(json.dumps(status))
        time.sleep(config["writer_interval"])


if __name__ == "__main__":
    main()
