"""Without ``fcntl`` (not POSIX): ``import mds_core`` and local reads work; streaming says it needs Linux or macOS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from mds_core import MDSWriter

# Run in a fresh interpreter: ``sys.modules["fcntl"] = None`` makes every ``import fcntl`` raise ImportError,
# as on Windows. The script prints what it saw as JSON on its last line.
SCRIPT = r"""
import json, sys
sys.modules["fcntl"] = None
import mds_core
from mds_core import LocalDataset, StreamingDataset
from mds_core.errors import PlatformError
from mds_core.storage.files import file_lock

raw, zipped, job_root = sys.argv[1:4]
seen = {"ids": [int(s["id"]) for s in LocalDataset(raw)], "zipped": [int(s["id"]) for s in LocalDataset(zipped)]}
seen["item"] = LocalDataset(raw)[3]["text"]
for name, call in (
    ("streaming", lambda: StreamingDataset(local=raw, job_root=job_root, batch_size=2)),
    ("iterating", lambda: next(iter(StreamingDataset(local=raw, job_root=job_root, batch_size=2)))),
    ("lock", lambda: file_lock(job_root + "/x.lock").__enter__()),
):
    try:
        call()
        seen[name] = None
    except PlatformError as err:
        seen[name] = str(err)
print(json.dumps(seen))
"""


def _write(out: Path, **kwargs) -> str:
    with MDSWriter(out=str(out), columns={"id": "int", "text": "str", "v": "ndarray:int16"}, **kwargs) as writer:
        for i in range(6):
            writer.write({"id": i, "text": f"row {i}", "v": np.arange(i + 1, dtype=np.int16)})
    return str(out)


def test_without_fcntl_local_reads_work_and_streaming_says_it_needs_posix(tmp_path: Path) -> None:
    raw, zipped = _write(tmp_path / "raw"), _write(tmp_path / "zipped", compression="zstd")
    job_root = tmp_path / "jobs"
    job_root.mkdir()
    command = [sys.executable, "-c", SCRIPT, raw, zipped, str(job_root)]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1]
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["ids"] == seen["zipped"] == list(range(6)) and seen["item"] == "row 3"
    needs_posix = (
        "streaming coordination (job directories, cross-process file locks) needs a POSIX system (Linux or macOS)"
    )
    assert seen["streaming"] == seen["iterating"]
    assert seen["streaming"].startswith(f"job directory {job_root}/mds-") and needs_posix in seen["streaming"]
    assert seen["lock"] == f"{job_root}/x.lock: {needs_posix}, and this Python has no fcntl module; " + (
        "LocalDataset still reads local datasets"
    )
    assert not list(job_root.iterdir())  # refused before any job directory was made
