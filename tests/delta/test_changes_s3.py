"""Incremental by table version on the loopback S3 server: a bounded watch, and a plan and its conversion."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta_changes import plan_increment
from mds_core.convert.delta_increment import convert_added_files
from mds_core.convert.delta_log import latest_delta_version
from tests.delta.tables import ids, recorded, rows
from testsupport.s3 import delta_options

deltalake = pytest.importorskip("deltalake")

# Without a checkpoint: s3fs's HEAD for _last_checkpoint (404) and its one-key listing of the name as a folder,
# then the log's listing. Three requests either way, whatever the log's length.
SHORT_COST = Counter({("HEAD", "_last_checkpoint"): 1, ("GET", "list"): 2})


def _uploaded(s3_server, local: Path, versions: int) -> str:
    """A table of ``versions`` one-row appends written on disk by deltalake (a checkpoint every 100 versions,
    its default), then copied to a fresh bucket: writing 300 commits through moto would take minutes."""
    import s3fs

    deltalake.write_deltalake(local, pa.table({"id": ids(1)}))
    for n in range(1, versions):
        deltalake.write_deltalake(local, pa.table({"id": ids(1, n)}), mode="append")
    uri = f"s3://{s3_server.new_bucket()}/table"
    s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server.endpoint}).put(str(local), uri[5:], recursive=True)
    return uri


def _watch(s3_server, uri: str) -> tuple[int, Counter]:
    since = s3_server.log_position()
    latest = latest_delta_version(uri, delta_options(s3_server.endpoint))
    requests = s3_server.requests(since)
    return latest, Counter((r.method, "list" if "list-type" in r.query else r.path.split("/")[-1]) for r in requests)


@pytest.mark.slow  # 300 versions written (17 s)
def test_watching_the_latest_version_costs_the_same_after_30_or_300_versions(s3_server, tmp_path: Path) -> None:
    short = _uploaded(s3_server, tmp_path / "short", 30)
    long = _uploaded(s3_server, tmp_path / "long", 300)
    assert (tmp_path / "long" / "_delta_log" / "_last_checkpoint").read_text().startswith('{"version":299,')
    (short_latest, short_cost), (long_latest, long_cost) = _watch(s3_server, short), _watch(s3_server, long)
    assert (short_latest, long_latest) == (29, 299)
    # s3fs reads _last_checkpoint with a HEAD and a GET; then one listing that starts after the checkpoint
    assert long_cost == Counter({("HEAD", "_last_checkpoint"): 1, ("GET", "_last_checkpoint"): 1, ("GET", "list"): 1})
    assert short_cost == SHORT_COST, short_cost
    assert sum(short_cost.values()) == sum(long_cost.values()) == 3


def test_a_plan_and_its_conversion_on_s3(s3_server, tmp_path: Path) -> None:
    options = delta_options(s3_server.endpoint)
    uri = f"s3://{s3_server.new_bucket()}/tables/events"
    write = deltalake.write_deltalake
    write(uri, pa.table({"id": ids(2), "day": ["a", "b"]}), partition_by=["day"], storage_options=options)
    write(uri, pa.table({"id": ids(2, 2), "day": ["b", "c"]}), mode="append", storage_options=options)
    plan = plan_increment(uri, 0, storage_options=options)
    assert (plan.mode, plan.to_version, sorted(str(f.partition_values["day"]) for f in plan.added_files)) == (
        "append",
        1,
        ["b", "c"],  # one commit's files, in no defined order
    )
    record = recorded(uri, 0, options)
    result = convert_added_files(
        uri, plan.added_files, tmp_path / "new", version=1, recorded=record, storage_options=options
    )
    assert result.table_uri.rstrip("/") == uri
    assert rows(tmp_path / "new") == [{"id": 2, "day": "b"}, {"id": 3, "day": "c"}]
