"""dataframe_to_mds to the loopback S3 server (moto, started by tests/conftest.py's ``s3_server``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mds_core import LocalDataset, dataframe_to_mds
from tests.spark.test_dataframe_to_mds import _frame


@pytest.mark.connect_too
def test_eight_partitions_to_s3(spark, s3_server, tmp_path: Path) -> None:
    from mds_core.storage.remote import open_store

    url = f"s3://{s3_server.new_bucket()}/datasets/eight"
    result = dataframe_to_mds(_frame(spark), mds_kwargs={"out": url, "size_limit": "1kb"})
    assert result[1] == url and result.stats.rows_per_partition == [50] * 8

    store = open_store(url)
    keys = store.list()
    assert not [key for key in keys if key.startswith("_staging")]  # staging is gone, losers included
    shards = json.loads(store.read_bytes("index.json"))["shards"]
    indexed = {s["zip_data"]["basename"] for s in shards}
    assert set(keys) == indexed | {f"{p:05}/index.json" for p in range(8)} | {"index.json"}
    assert result.stats.shards == len(shards) > 8

    local = tmp_path / "copy"
    for key in keys:
        store.download(key, str(local / key))
    assert [int(s["id"]) for s in LocalDataset(local)] == list(range(400))
