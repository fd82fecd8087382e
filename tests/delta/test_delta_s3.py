"""delta_to_mds from a Delta table on the loopback S3 server (moto, started by tests/conftest.py's ``s3_server``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta import delta_to_mds
from mds_core.errors import DeltaTableNotFoundError
from tests.delta.tables import ids, rows
from testsupport.s3 import delta_options

deltalake = pytest.importorskip("deltalake")


def test_versions_of_a_table_on_s3(s3_server, tmp_path: Path) -> None:
    options = delta_options(s3_server.endpoint)
    uri = f"s3://{s3_server.new_bucket()}/tables/events"
    write = deltalake.write_deltalake
    write(uri, pa.table({"id": ids(3), "day": ["a", "b", "a"]}), partition_by=["day"], storage_options=options)
    write(uri, pa.table({"id": ids(2, 3), "day": ["b", "b"]}), mode="append", storage_options=options)
    deltalake.DeltaTable(uri, storage_options=options).delete("id = 0")

    latest = delta_to_mds(uri, tmp_path / "latest", storage_options=options)
    first = delta_to_mds(uri, tmp_path / "v0", version=0, storage_options=options, predicate="day = 'a'")

    assert (latest.version, first.version, latest.table_id) == (2, 0, first.table_id)
    assert latest.table_uri.rstrip("/") == uri
    assert [r["id"] for r in rows(tmp_path / "latest")] == [1, 2, 3, 4]
    assert rows(tmp_path / "v0") == [{"id": 0, "day": "a"}, {"id": 2, "day": "a"}]
    with pytest.raises(DeltaTableNotFoundError, match=f"{uri} has no version 5: its latest is 2"):
        delta_to_mds(uri, tmp_path / "v5", version=5, storage_options=options)
