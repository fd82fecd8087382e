"""A shard-set root on local disk and on the loopback S3 server, and a small day writer, for the version tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mds_core import MDSWriter

COLUMNS = {"id": "int", "day": "str"}


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "set")
    return f"s3://{request.getfixturevalue('s3_server').new_bucket()}/set"


def write_day(out: str, day: str, ids: range) -> None:
    """An MDS dataset of one day's rows in small shards (1 KiB), so a day spans several."""
    with MDSWriter(out=out, columns=COLUMNS, size_limit=1024) as writer:
        for i in ids:
            writer.write({"id": i, "day": day})
