"""Finding 12 of the review, the pipelines' URLs: a landing or warehouse URL with ``user:password@`` (fsspec reads
them from FTP, SFTP, HTTP... URLs) is never echoed in metadata, logs or error messages, and the snippets the
pipelines show read through the per-user default cache, not a shared, predictable ``/tmp`` folder.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mds_core.errors import StorageError
from pipelines.assets.metadata import standard_metadata
from pipelines.assets.published import published_metadata
from pipelines.assets.raw import describe_source, shown_source
from pipelines.automation import landing_run_request
from pipelines.landing import landed_days
from pipelines.registry import DatasetSpec, Source
from pipelines.resources import TableCatalog
from tests.security.conftest import Listener
from testsupport.fault_proxy import free_port

PASSWORD = "hunter2-s3cr3t"


def test_the_standard_metadata_shows_a_url_without_its_credentials() -> None:
    metadata = standard_metadata(3, f"ftp://etl:{PASSWORD}@files.example/warehouse/t", [("id", "bigint")])
    assert metadata["dagster/uri"].value == "ftp://***@files.example/warehouse/t"


def test_a_path_sources_metadata_and_lineage_show_no_password() -> None:
    source = Source(kind="path", path=f"https://etl:{PASSWORD}@files.example/exports/day.parquet")
    assert describe_source(source) == "parquet files at https://***@files.example/exports/day.parquet"
    shown = {**source.model_dump(exclude_none=True), "path": "https://***@files.example/exports/day.parquet"}
    assert shown_source(source) == shown  # exclude_none: no Delta table version for a path source


def test_a_missing_table_names_its_location_without_the_password() -> None:
    catalog = TableCatalog(warehouse=f"memory://etl:{PASSWORD}@bucket/warehouse")
    with pytest.raises(FileNotFoundError) as missing:
        catalog.read_days(None, "digits_raw", ["2026-01-01"])  # type: ignore[arg-type]  # no Spark: fails first
    assert str(missing.value) == (
        "table 'digits_raw' has no data at memory://***@bucket/warehouse/digits_raw; materialise its asset first"
    )


@pytest.fixture
def failing_server() -> Iterator[Listener]:
    """A loopback HTTP server that answers every request with 500."""
    server = Listener("500 Internal Server Error")
    yield server
    server.close()


def test_a_landing_zone_that_fails_is_named_without_the_password(failing_server: Listener) -> None:
    port = failing_server.port
    url = f"http://etl:{PASSWORD}@127.0.0.1:{port}/landing/digits"
    with pytest.raises(StorageError) as failed:
        landed_days(url)
    assert PASSWORD not in str(failed.value)
    assert str(failed.value).startswith(
        f"landing zone http://***@127.0.0.1:{port}/landing/digits: cannot list it (ClientResponseError: 500"
    )


def test_an_unreachable_landing_zone_is_named_without_the_password() -> None:
    port = free_port()  # closed once found
    with pytest.raises(StorageError) as failed:
        landed_days(f"ftp://etl:{PASSWORD}@127.0.0.1:{port}/landing/digits")
    assert PASSWORD not in str(failed.value) and f"ftp://***@127.0.0.1:{port}/landing/digits" in str(failed.value)


def test_a_landing_runs_tag_shows_no_password() -> None:
    url = f"ftp://etl:{PASSWORD}@files.example/landing/digits/2026-01-01"
    request = landing_run_request(DatasetSpec(name="digits"), "2026-01-01", url, "csv", "sig")
    assert request.tags["mds/landing"] == "ftp://***@files.example/landing/digits/2026-01-01"


def test_the_published_versions_metadata_shows_no_password_and_no_shared_cache() -> None:
    metadata = published_metadata(f"sftp://etl:{PASSWORD}@files.example/sets/digits", 7, 6)
    assert PASSWORD not in repr(metadata)
    assert metadata["dagster/uri"].value == metadata["store_url"] == "sftp://***@files.example/sets/digits"
    assert metadata["read_it"].value == (
        "```python\nStreamingDataset(remote='sftp://***@files.example/sets/digits', version=7, batch_size=32)\n```"
    )
