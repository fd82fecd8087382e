"""Finding 3 of the review, in mds_core: a ``host`` storage option sent the environment's Databricks token
to whatever host it named, over plain http. A listener on loopback stands for that other host."""

from __future__ import annotations

import pytest

from mds_core.errors import ConfigurationError
from mds_core.storage.remote import open_store
from tests.security.conftest import Listener

SECRET = "dapiDEPLOYMENTSECRET"


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABRICKS_TOKEN", SECRET)
    monkeypatch.setenv("DATABRICKS_HOST", "https://my-workspace.cloud.databricks.com")
    for name in ("DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)


def test_the_environments_token_never_goes_to_a_host_an_option_names(listener: Listener, deployment: None) -> None:
    """The issue's fourth try. Before the fix the listener received ``Authorization: Bearer <the token>``."""
    store = None
    with pytest.raises(ConfigurationError, match=r"host=http://127\.0\.0\.1:\d+ is not the workspace your credentials"):
        store = open_store("dbfs:/Volumes/c/s/v/set", storage_options={"host": listener.url})
        store.read_bytes("index.json")
    assert store is None and listener.received == []


def test_a_host_with_its_own_token_is_that_hosts_business(listener: Listener, deployment: None) -> None:
    store = open_store("dbfs:/Volumes/c/s/v/set", storage_options={"host": listener.url, "token": "its-own"}, retry=1)
    with pytest.raises(Exception):  # noqa: B017  (the listener answers 404 to everything)
        store.read_bytes("index.json")
    seen = listener.authorizations
    assert "Bearer its-own" in seen and set(seen) <= {"Bearer its-own", None}  # None: host metadata


def test_a_workspace_over_plain_http_is_refused_unless_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABRICKS_TOKEN", SECRET)
    monkeypatch.setenv("DATABRICKS_HOST", "http://my-workspace.example.com")
    with pytest.raises(ConfigurationError, match=r"http://my-workspace\.example\.com is not https"):
        open_store("dbfs:/Volumes/c/s/v/set")


def test_a_password_in_a_url_is_never_in_a_message() -> None:
    """Finding 12: fsspec reads a user and password from a URL (ftp, sftp, http...); messages show neither."""
    from mds_core.errors import StorageError

    with pytest.raises(StorageError, match=r"^cannot open ftp://\*\*\*@127\.0\.0\.1:9/landing: ConnectionRefused"):
        open_store("ftp://mds:s3cretpw@127.0.0.1:9/landing", any_fsspec=True)  # an ftp client connects when made
    store = open_store("http://mds:s3cretpw@127.0.0.1:9/landing", any_fsspec=True, retry=1, timeout=5)
    assert "s3cretpw" not in repr(store) and store.url_of("a.csv") == "http://***@127.0.0.1:9/landing/a.csv"
    assert store.address_of("a.csv") == "http://mds:s3cretpw@127.0.0.1:9/landing/a.csv"
    with pytest.raises(StorageError) as failure:
        store.read_bytes("a.csv")
    assert "s3cretpw" not in str(failure.value) and "http://***@127.0.0.1:9/landing/a.csv" in str(failure.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("ftp://etl:hunter2@files.example.com/landing", "ftp://***@files.example.com/landing"),
        ("https://tok@host.example.com/a?b=1", "https://***@host.example.com/a?b=1"),
        (
            "sc://connect.example.com:443/;token=dapiSECRET;use_ssl=true",
            "sc://connect.example.com:443/;token=***;use_ssl=true",
        ),
        ("s3://bucket/key@v1", "s3://bucket/key@v1"),
        ("/data/a@b", "/data/a@b"),
    ],
)
def test_redact_keeps_the_address_and_drops_the_secret(url: str, shown: str) -> None:
    from mds_core.storage.urls import redact

    assert redact(url) == shown
