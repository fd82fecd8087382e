"""delta_to_mds by Unity Catalog name: the loopback catalog (testsupport/unity_catalog.py) spoken to by databricks-sdk,
a real Delta table on the loopback S3, read with the credentials the catalog vends and nothing else."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta import delta_to_mds
from mds_core.errors import (
    DeltaTableError,
    DeltaTableNotFoundError,
    UnityCatalogCredentialsExpiredError,
    UnityCatalogError,
    UnityCatalogPermissionError,
    UnityCatalogTableNotFoundError,
)
from mds_core.storage.unity_catalog import is_table_name, resolve_table, table_name
from pipelines.delta_source import table_location
from tests.delta.tables import ids, rows
from testsupport.s3 import delta_options
from testsupport.unity_catalog import UnityCatalogServer, VendedKeyS3

deltalake = pytest.importorskip("deltalake")

NAME = "main.sales.orders"
# What the caller gives: where the store is, and no key (moto's own are for writing the table only)
PLACES = {"AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}


@pytest.fixture(scope="module")
def table(s3_server) -> str:
    """``s3://.../orders``: version 0 with ids 0..2, version 1 appends 3..4."""
    options = delta_options(s3_server.endpoint)
    uri = f"s3://{s3_server.new_bucket()}/orders"
    deltalake.write_deltalake(uri, pa.table({"id": ids(3), "city": ["Oslo", "Lima", "Pune"]}), storage_options=options)
    more = pa.table({"id": ids(2, 3), "city": ["Kobe", "Nice"]})
    deltalake.write_deltalake(uri, more, mode="append", storage_options=options)
    return uri


@pytest.fixture
def catalog(table: str) -> Iterator[UnityCatalogServer]:
    server = UnityCatalogServer()
    server.add_table(NAME, table)
    yield server
    server.stop()


@pytest.fixture
def store(s3_server, catalog: UnityCatalogServer) -> Iterator[VendedKeyS3]:
    proxy = VendedKeyS3(s3_server.endpoint, catalog, accepted=frozenset({"own-key"}))
    yield proxy
    proxy.stop()


def _workspace(catalog: UnityCatalogServer, token: str | None = None) -> dict[str, str]:
    return {"host": catalog.endpoint, "token": token or catalog.token}


def _read(catalog: UnityCatalogServer, store: VendedKeyS3, out: Path, name: str = NAME, **kwargs):
    options = {**PLACES, "AWS_ENDPOINT_URL": store.endpoint, **kwargs.pop("extra", {})}
    return delta_to_mds(name, out, storage_options=options, workspace=_workspace(catalog), **kwargs)


def test_a_version_read_by_name_with_vended_credentials_only(catalog, store, table, tmp_path: Path) -> None:
    first = _read(catalog, store, tmp_path / "v0", version=0)
    latest = _read(catalog, store, tmp_path / "latest", name=f"uc://{NAME}")

    assert (first.uc_name, first.version, latest.uc_name, latest.version) == (NAME, 0, NAME, 1)
    assert first.table_uri.rstrip("/") == table
    assert rows(tmp_path / "v0") == [{"id": 0, "city": "Oslo"}, {"id": 1, "city": "Lima"}, {"id": 2, "city": "Pune"}]
    assert [r["id"] for r in rows(tmp_path / "latest")] == [0, 1, 2, 3, 4]
    assert len(catalog.vended) == 2  # one vending call per read
    assert store.refused == []  # every request to the store was signed with a vended key and its session token
    assert len(store.forwarded) > 0


def test_resolve_table_maps_the_vended_keys_over_the_callers_options(catalog, table) -> None:
    own = {"aws_access_key_id": "mine", "AWS_REGION": "eu-west-1"}
    resolved = resolve_table(NAME, storage_options=own, workspace=_workspace(catalog))

    [vended] = catalog.vended
    assert (resolved.name, resolved.table_id, resolved.storage_location) == (
        NAME,
        catalog.tables[NAME]["table_id"],
        table,
    )
    assert resolved.storage_options == {
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": vended["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": vended["secret_access_key"],
        "AWS_SESSION_TOKEN": vended["session_token"],
    }
    assert resolved.expires_at is not None


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("main.sales.orders", True),
        ("uc://main.sales", True),  # explicit: checked, and refused, by table_name
        ("main.sales", False),
        ("./main.sales.orders", False),
        ("s3://bucket/main.sales.orders", False),
        ("a.b.c.d", False),
        (Path("main.sales.orders"), False),
    ],
)
def test_which_table_uris_are_unity_catalog_names(uri, expected: bool) -> None:
    assert is_table_name(uri) is expected


@pytest.mark.parametrize("bad", ["uc://main.sales", "uc://main..orders", "uc://main.sales.or ders", "uc://a.b.c.d"])
def test_a_malformed_name_is_refused_before_any_request(bad: str) -> None:
    with pytest.raises(UnityCatalogError, match=r"is not a Unity Catalog table name: write three dot-separated"):
        table_name(bad)


def test_a_malformed_name_through_delta_to_mds(catalog, tmp_path: Path) -> None:
    with pytest.raises(UnityCatalogError, match=r"^'uc://main\.sales' is not a Unity Catalog table name"):
        delta_to_mds("uc://main.sales", tmp_path / "out", workspace=_workspace(catalog))
    assert [path for _, path in catalog.requests if "unity-catalog" in path] == []


def test_a_missing_table_is_not_found(catalog, store, tmp_path: Path) -> None:
    with pytest.raises(UnityCatalogTableNotFoundError) as caught:
        _read(catalog, store, tmp_path / "out", name="main.sales.returns")
    assert isinstance(caught.value, DeltaTableNotFoundError)
    assert str(caught.value) == (
        f"Unity Catalog table main.sales.returns not found in {catalog.endpoint} (404 tables.get: Table "
        "'main.sales.returns' does not exist.): check the catalog, schema and table names, and that you may see it "
        "(without USE CATALOG, USE SCHEMA and SELECT a table looks missing)"
    )


def test_a_missing_privilege_is_a_permission_error(catalog, store, tmp_path: Path) -> None:
    catalog.denied_tables.add(NAME)
    with pytest.raises(UnityCatalogPermissionError) as caught:
        _read(catalog, store, tmp_path / "out")
    assert isinstance(caught.value, PermissionError)
    assert str(caught.value) == (
        f"{catalog.endpoint} refused {NAME} (403 PERMISSION_DENIED tables.get: User does not have SELECT on Table "
        f"'{NAME}'.): reading it needs USE CATALOG on main, USE SCHEMA on main.sales and SELECT on {NAME}"
    )


def test_no_external_use_schema_is_a_permission_error(catalog, store, tmp_path: Path) -> None:
    catalog.no_external_use.add("main.sales")
    with pytest.raises(UnityCatalogPermissionError, match=r"needs EXTERNAL USE SCHEMA on main\.sales"):
        _read(catalog, store, tmp_path / "out")


def test_an_expired_workspace_token_is_unauthenticated(catalog, store, tmp_path: Path) -> None:
    catalog.expired_tokens.add("dapi-old")
    with pytest.raises(UnityCatalogPermissionError) as caught:
        delta_to_mds(NAME, tmp_path / "out", workspace=_workspace(catalog, "dapi-old"))
    assert str(caught.value) == (
        f"{catalog.endpoint} did not accept the credentials sent to resolve {NAME} (401 UNAUTHENTICATED "
        "tables.get: The access token has expired.): set a valid, unexpired DATABRICKS_TOKEN (or profile, or "
        "service principal) for that workspace"
    )


def test_credentials_vended_already_expired_are_refused(catalog, store, tmp_path: Path) -> None:
    catalog.credential_lifetime_s = -60
    with pytest.raises(UnityCatalogCredentialsExpiredError, match=rf"vended for {NAME} expired at .*, before they"):
        _read(catalog, store, tmp_path / "out")
    assert store.requests == []  # refused before the store was asked anything


def test_the_store_answering_expired_token_names_the_table(catalog, store, tmp_path: Path) -> None:
    catalog.expire_at_store = True
    with pytest.raises(UnityCatalogCredentialsExpiredError) as caught:
        _read(catalog, store, tmp_path / "out")
    assert str(caught.value).startswith(
        f"the storage credentials vended for Unity Catalog table {NAME} expired while it was read (vended until "
    )
    assert "ExpiredToken" in store.refused


def test_a_table_that_is_not_delta_is_refused_by_name(catalog, store, tmp_path: Path) -> None:
    catalog.add_table("main.sales.raw_csv", "s3://elsewhere/raw", data_source_format="CSV")
    with pytest.raises(UnityCatalogError) as caught:
        _read(catalog, store, tmp_path / "out", name="main.sales.raw_csv")
    assert str(caught.value) == (
        "Unity Catalog table main.sales.raw_csv is a EXTERNAL in format CSV, not a Delta table: delta_to_mds reads "
        "Delta tables only (convert other tables through Spark: dataframe_to_mds)"
    )


@pytest.mark.parametrize("vending", ["disabled", "absent"])
def test_without_vending_the_callers_options_are_used_and_said(
    catalog, store, tmp_path: Path, caplog, vending: str
) -> None:
    catalog.vending = vending
    own = {"AWS_ACCESS_KEY_ID": "own-key", "AWS_SECRET_ACCESS_KEY": "own-secret"}
    with caplog.at_level(logging.INFO, logger="mds_core.storage.unity_catalog"):
        done = _read(catalog, store, tmp_path / "out", extra=own)

    assert (done.uc_name, done.version) == (NAME, 1)
    assert [r["id"] for r in rows(tmp_path / "out")] == [0, 1, 2, 3, 4]
    assert catalog.vended == []
    said = {"disabled": "External data access is not enabled on the metastore.", "absent": "No API found for 'POST "}
    assert f"{NAME}: credential vending is not enabled in the workspace ({said[vending]}" in caplog.text


@pytest.mark.parametrize(
    ("cloud", "expected"),
    [
        ("azure_sas", {"azure_storage_sas_token": "sv=2026-01-01&sig=vended"}),
        ("azure_aad", {"azure_storage_token": "eyJ.vended.aad"}),
        ("gcp", {}),  # delta-rs takes no OAuth token for GCS: the caller's options stay, and a warning says so
    ],
)
def test_other_clouds_credentials(catalog, caplog, cloud: str, expected: dict[str, str]) -> None:
    catalog.cloud = cloud
    own = {"azure_storage_account_name": "lake"}
    with caplog.at_level(logging.INFO, logger="mds_core.storage.unity_catalog"):
        resolved = resolve_table(NAME, storage_options=own, workspace=_workspace(catalog))

    assert resolved.storage_options == own | expected
    assert (resolved.expires_at is None) == (cloud == "gcp")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    gcp = f"{NAME}: delta-rs cannot use the credentials vended (a GCP OAuth token or none)"
    assert warned == ([gcp] if cloud == "gcp" else [])


def test_a_plain_uri_with_keys_the_store_refuses_is_a_delta_table_error(store, table, tmp_path: Path) -> None:
    bucket_path = table.removeprefix("s3://")
    options = {**PLACES, "AWS_ENDPOINT_URL": store.endpoint, "AWS_ACCESS_KEY_ID": "someone-elses"}
    options |= {"AWS_SECRET_ACCESS_KEY": "wrong"}
    with pytest.raises(DeltaTableError, match=f"cannot read the Delta log of s3://{bucket_path}: ") as raised:
        delta_to_mds(table, tmp_path / "out", storage_options=options)
    assert type(raised.value) is DeltaTableError
    assert "InvalidAccessKeyId" in store.refused
    assert not (tmp_path / "out").exists()


def test_a_table_kept_in_a_volume_is_read_with_the_volumes_vended_credentials(
    catalog, store, table, tmp_path: Path, monkeypatch
) -> None:
    root, _, folder = table.rpartition("/")  # the volume is the bucket's root, the table a folder in it
    catalog.add_volume("main.sales.lake", root)
    path = f"dbfs:/Volumes/main/sales/lake/{folder}"
    result = _read(catalog, store, tmp_path / "v0", name=path, version=0)
    assert (result.uc_name, result.version, result.table_uri.rstrip("/")) == (None, 0, table)
    assert [r["id"] for r in rows(tmp_path / "v0")] == [0, 1, 2]
    assert (len(catalog.vended), store.refused) == (1, [])  # read with the volume's vended key alone
    with pytest.raises(UnityCatalogTableNotFoundError, match=r"Unity Catalog volume main\.sales\.gone not found in"):
        _read(catalog, store, tmp_path / "gone", name="dbfs:/Volumes/main/sales/gone/orders")
    with pytest.raises(UnityCatalogError, match=r"'dbfs:/Volumes/main/sales' is not a path in a Unity Catalog volume"):
        _read(catalog, store, tmp_path / "short", name="dbfs:/Volumes/main/sales")
    with pytest.raises(UnityCatalogError, match=r"/lake/\.\./other': a path in a volume has no empty, '\.' or '\.\.'"):
        _read(catalog, store, tmp_path / "up", name="dbfs:/Volumes/main/sales/lake/../other")
    # The pipelines' delta source resolves the same path, with the workspace from the environment.
    monkeypatch.setenv("DATABRICKS_HOST", catalog.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", catalog.token)
    location, options, uc_name = table_location(path)
    assert (location, uc_name, options is not None and "AWS_SESSION_TOKEN" in options) == (table, None, True)
