"""The pipelines reach every store through mds_core.storage: the warehouse and the landing zone get the
registry's set-up (S3_ENDPOINT_URL, one-attempt clients, no listing cache, bucket semantics), on the real
loopback servers of tests/conftest.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mds_core.errors import StorageError
from mds_core.storage.stores import FSSPEC_FALLBACK, STORES
from pipelines.landing import landed_days
from pipelines.resources import SCHEMA_FILE, TableCatalog

ROOT = Path(__file__).resolve().parents[2]


def test_a_warehouse_on_s3_gets_the_shard_stores_set_up(s3_server) -> None:
    import boto3
    from pyspark.sql.types import LongType, StructField, StructType

    bucket = s3_server.new_bucket()
    catalog = TableCatalog(warehouse=f"s3://{bucket}/warehouse")  # no options: S3_ENDPOINT_URL finds the server
    folder = catalog.folder("raw")
    assert folder.kind is STORES["s3"] and folder.fs.retries == 1  # one attempt per call: our retries count them
    assert folder.list() == [] and not folder.exists("") and catalog.stored_schema("raw") is None

    schema = StructType([StructField("id", LongType()), StructField("day", LongType())])
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    for key in ("day=2026-01-01/part-0.parquet", "day=2026-01-02/part-0.parquet"):
        client.put_object(Bucket=bucket, Key=f"warehouse/raw/{key}", Body=b"PAR1")
    client.put_object(Bucket=bucket, Key=f"warehouse/raw/{SCHEMA_FILE}", Body=schema.json().encode())

    # The folder listed the table before these files came: with a listing cache it would not see them.
    assert folder.exists(SCHEMA_FILE) and folder.exists("day=2026-01-02/part-0.parquet")
    assert catalog.stored_schema("raw") == schema
    catalog.clear_days("raw", ["2026-01-01", "2026-01-09"])  # a day with no folder is fine
    assert folder.list() == [SCHEMA_FILE, "day=2026-01-02/part-0.parquet"]


def test_a_warehouse_on_s3_takes_the_deployments_storage_options(s3_server, monkeypatch) -> None:
    """Like the shard store: endpoint and credentials from ``$MDS_WAREHOUSE_STORAGE_OPTIONS`` alone reach
    the server; a run's ``storage_options`` add harmless options and may not name an endpoint."""
    from dagster import EnvVar
    from pyspark.sql.types import LongType, StructField, StructType

    from mds_core.errors import ConfigurationError

    bucket = s3_server.new_bucket()
    for variable in ("S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(variable)  # only the options say where the server is and who asks
    options = {"endpoint_url": s3_server.endpoint, "key": "testing", "secret": "testing"}
    monkeypatch.setenv("MDS_WAREHOUSE_STORAGE_OPTIONS", json.dumps(options))
    catalog = TableCatalog(
        warehouse=f"s3://{bucket}/warehouse",
        storage_options={"default_block_size": 1 << 20},
        storage_options_json=EnvVar("MDS_WAREHOUSE_STORAGE_OPTIONS"),
    )
    assert catalog.options() == {"default_block_size": 1 << 20, **options}
    schema = StructType([StructField("id", LongType()), StructField("day", LongType())])
    folder = catalog.folder("raw")
    assert folder.kind is STORES["s3"] and folder.fs.default_block_size == 1 << 20  # the run's option too
    assert catalog.stored_schema("raw") is None
    folder.write_bytes(SCHEMA_FILE, schema.json().encode())
    folder.write_bytes("day=2026-01-01/part-0.parquet", b"PAR1")
    assert catalog.stored_schema("raw") == schema
    catalog.clear_days("raw", ["2026-01-01"])
    assert folder.list() == [SCHEMA_FILE]

    redirected = TableCatalog(warehouse=f"s3://{bucket}/warehouse", storage_options={"endpoint_url": "http://x"})
    message = (
        r"^TableCatalog.storage_options: 'endpoint_url' may not be set in run config: .* Only the deployment's "
        r"\$MDS_WAREHOUSE_STORAGE_OPTIONS sets them$"
    )
    with pytest.raises(ConfigurationError, match=message):
        redirected.folder("raw")


def test_a_landing_zone_on_an_fsspec_url_goes_through_the_fallback() -> None:
    from mds_core.storage.remote import open_store

    zone = open_store("memory://pipeline-stores/landing", any_fsspec=True)
    assert zone.kind is FSSPEC_FALLBACK
    assert landed_days(zone.url) == {}
    zone.write_bytes("2026-02-01/a.csv", b"id\n1\n")
    first = landed_days(zone.url)
    assert list(first) == ["2026-02-01"] and first["2026-02-01"][0] == "csv"
    zone.write_bytes("2026-02-02/b.json", b'{"id": 2}\n')  # seen at the next call: no listing kept between calls
    assert list(landed_days(zone.url)) == ["2026-02-01", "2026-02-02"]
    zone.delete_tree("")


@pytest.mark.parametrize(("server", "kind"), [("gcs_server", "gcs"), ("azurite_server", "azure")])
def test_a_landing_zone_knows_buckets_from_the_registry(server: str, kind: str, request: pytest.FixtureRequest) -> None:
    from mds_core.storage.remote import open_store

    root = request.getfixturevalue(server).new_root()
    assert landed_days(f"{root}/landing") == {}  # the bucket exists: nothing has landed yet
    open_store(f"{root}/landing").write_bytes("2026-02-01/a.csv", b"id\n1\n")
    assert list(landed_days(f"{root}/landing")) == ["2026-02-01"]

    word = STORES[kind].bucket
    missing = f"{root.split('://')[0]}://no-such-{word}/landing"
    with pytest.raises(StorageError, match=f"landing zone {missing}: the {word} 'no-such-{word}' does not exist"):
        landed_days(missing)


def test_the_pipelines_open_no_filesystem_of_their_own() -> None:
    for source in sorted((ROOT / "pipelines").rglob("*.py")):
        text = source.read_text()
        assert not re.search(r"^\s*(import fsspec|from fsspec)", text, re.MULTILINE), source
        assert "url_to_fs" not in text, source
