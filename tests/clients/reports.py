"""What the client tests share: run a script in a client's environment and read its one-line JSON report,
and copy a store's files to a local folder to read them back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mds_core.storage.remote import open_store


def run_report(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """``command``'s last line of output, parsed as JSON; its stderr's tail if it failed."""
    run = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def download_all(url: str, dest: Path) -> Path:
    """Every file under ``url``, copied to ``dest`` with the same relative paths."""
    store = open_store(url)
    for rel in store.list():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        store.download(rel, str(dest / rel))
    return dest
