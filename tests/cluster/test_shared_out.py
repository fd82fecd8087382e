"""The commit's own guard for a local ``out`` that the executors wrote somewhere the driver cannot see.

The probe in ``mds_core.convert.cluster`` normally stops such a conversion before any task runs (tested on
the real cluster in test_cluster.py); this is the second line: the driver checks that every attempt it is
about to commit is there before it moves anything, so a half-committed set is impossible.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mds_core.convert.route import route_for
from mds_core.convert.staging import open_target
from mds_core.errors import ConfigurationError
from mds_core.format.index import dumps_index
from mds_core.writer.mds_writer import MDSWriter


def _attempt(path: Path) -> str:
    with MDSWriter(out=str(path), columns={"id": "int64"}) as writer:
        for i in range(10):
            writer.write({"id": i})
    return dumps_index(writer.shards)


def _manifest(partition: int, attempt: int, index: str) -> dict[str, object]:
    """What the task of ``partition`` reports for the attempt it staged as ``<partition>.<attempt>``."""
    staging = f"{partition:05}.{attempt}"
    return dict(partition=partition, attempt=attempt, staging=staging, rows=10, skipped=0, index=index, missed=None)


def test_commit_refuses_attempts_written_out_of_the_drivers_sight(tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = open_target(route_for(str(out), connect=False), False)
    staging = target.staging_location("run")
    index = _attempt(Path(staging) / "00000.7")  # this attempt's files are on the driver's disk
    manifests = [_manifest(p, a, index) for p, a in ((0, 7), (1, 8))]  # 00001.8 was written on an executor's disk
    with pytest.raises(ConfigurationError, match=r"executors wrote 1 partition\(s\) .* that this driver cannot see"):
        target.commit(manifests, staging, True)
    assert os.listdir(out) == []  # nothing moved, no index, the staging tree removed


def test_commit_moves_everything_when_every_attempt_is_there(tmp_path: Path) -> None:
    out = tmp_path / "out"
    target = open_target(route_for(str(out), connect=False), False)
    staging = target.staging_location("run")
    manifests = [_manifest(p, p, _attempt(Path(staging) / f"{p:05}.{p}")) for p in (0, 1)]
    stats = target.commit(manifests, staging, True)
    assert stats.rows == 20 and sorted(os.listdir(out)) == ["00000", "00001", "index.json"]
