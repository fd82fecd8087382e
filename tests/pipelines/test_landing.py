"""The landing zone listed on a local folder and on the loopback S3 server (real s3fs, testsupport/s3.py)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from mds_core.errors import MDSError, StorageError
from pipelines.landing import LANDING_FORMATS, _file_version, day_url, landed_days
from testsupport.fault_proxy import free_port
from testsupport.s3 import MotoServer


class LocalZone:
    def __init__(self, root: Path) -> None:
        self.root, self.url, self.options = root, str(root), None

    def land(self, rel: str, data: bytes = b"id,label\n1,2\n") -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, ns=(path.stat().st_mtime_ns + 1_000_000,) * 2)  # a rewrite in the same tick still shows

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()


class S3Zone:
    def __init__(self, server: MotoServer, prefix: str = "landing") -> None:
        import boto3

        self.bucket = server.new_bucket()
        self.prefix = prefix
        self.url = f"s3://{self.bucket}/{prefix}"
        self.options = {"endpoint_url": server.endpoint}  # the options route, not only S3_ENDPOINT_URL
        self.client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")

    def land(self, rel: str, data: bytes = b"id,label\n1,2\n") -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{rel}", Body=data)

    def remove(self, rel: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{rel}")


@pytest.fixture(params=["local", "s3"])
def zone(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "local":
        return LocalZone(tmp_path / "landing")
    return S3Zone(request.getfixturevalue("s3_server"))


def test_days_formats_and_names_that_do_not_count(zone: Any) -> None:
    zone.land("2026-02-01/a.csv")
    zone.land("2026-02-02/b.json", b'{"id": 1}\n')
    zone.land("2026-02-02/c.jsonl", b'{"id": 2}\n')  # .json and .jsonl are both json
    zone.land("2026-02-03/a.parquet", b"PAR1")
    zone.land("2026-02-03/b.csv")  # two formats in one day: mixed
    zone.land("2026-02-04/PART.CSV")  # suffixes in any case
    for ignored in [
        "not-a-day/c.csv",
        "2026-02-05/notes.txt",
        "2026-02-06/_SUCCESS",
        "2026-02-06/_tmp.csv",
        "2026-02-06/.a.csv.crc",
        "_staging/x.csv",
        "2026-02-07/sub/x.csv",
        "top.csv",
        "2026-02-08x/a.csv",
    ]:
        zone.land(ignored)
    found = landed_days(zone.url, zone.options)
    assert {day: fmt for day, (fmt, _) in found.items()} == {
        "2026-02-01": "csv",
        "2026-02-02": "json",
        "2026-02-03": "mixed",
        "2026-02-04": "csv",
    }
    assert list(found) == sorted(found)
    assert all(len(signature) == 16 for _, signature in found.values())


def test_signature_changes_when_a_file_is_added_rewritten_or_removed(zone: Any) -> None:
    assert landed_days(zone.url, zone.options) == {}
    zone.land("2026-02-01/a.csv")
    zone.land("2026-03-01/a.csv")
    first = landed_days(zone.url, zone.options)
    assert landed_days(zone.url, zone.options) == first  # nothing changed: same signatures

    zone.land("2026-02-02/a.csv")  # a new day appears; the others keep their signatures
    second = landed_days(zone.url, zone.options)
    assert sorted(second) == ["2026-02-01", "2026-02-02", "2026-03-01"]
    assert second["2026-02-01"] == first["2026-02-01"] and second["2026-03-01"] == first["2026-03-01"]

    zone.land("2026-02-01/b.csv")  # added
    added = landed_days(zone.url, zone.options)["2026-02-01"]
    zone.land("2026-02-01/b.csv", b"id,label\n7,8\n")  # rewritten, same size
    rewritten = landed_days(zone.url, zone.options)["2026-02-01"]
    zone.remove("2026-02-01/b.csv")  # removed
    removed = landed_days(zone.url, zone.options)
    assert len({first["2026-02-01"], added, rewritten}) == 3
    assert removed["2026-02-01"] == first["2026-02-01"]  # the same files as at first: the same signature
    assert removed["2026-03-01"] == first["2026-03-01"]

    zone.remove("2026-02-02/a.csv")  # a day whose files are all gone is no day
    assert "2026-02-02" not in landed_days(zone.url, zone.options)


def test_missing_root_has_no_days(zone: Any) -> None:
    zone.land("2026-02-01/a.csv")
    assert landed_days(day_url(zone.url, "no-such-folder"), zone.options) == {}


def test_local_file_url_and_day_url(tmp_path: Path) -> None:
    LocalZone(tmp_path).land("2026-02-01/a.csv")
    assert list(landed_days(f"file://{tmp_path}")) == ["2026-02-01"]
    assert day_url(str(tmp_path), "2026-02-01") == str(tmp_path / "2026-02-01")
    assert day_url("s3://bucket/landing/", "2026-02-01") == "s3://bucket/landing/2026-02-01"
    assert set(LANDING_FORMATS.values()) == {"parquet", "csv", "json"}


def test_signatures_do_not_depend_on_the_time_zone() -> None:
    utc = datetime(2026, 2, 1, 12, tzinfo=UTC)
    local = utc.astimezone(timezone(timedelta(hours=2)))  # the same instant, printed differently
    assert _file_version({"size": 3, "LastModified": utc}) == _file_version({"size": 3, "LastModified": local})


def test_one_listing_per_call_on_s3(s3_server: MotoServer) -> None:
    zone = S3Zone(s3_server)
    for day in range(1, 21):
        zone.land(f"2026-01-{day:02d}/a.csv")
        zone.land(f"2026-01-{day:02d}/b.csv")
    since = s3_server.log_position()
    assert len(landed_days(zone.url, zone.options)) == 20
    requests = s3_server.requests(since)
    assert [(r.method, r.path) for r in requests] == [("GET", f"/{zone.bucket}")]  # one LIST, no HEAD/GET per file
    assert "list-type=2" in requests[0].query


def test_an_unreachable_store_or_a_missing_bucket_is_a_clear_error(s3_server: MotoServer) -> None:
    url = f"s3://{s3_server.new_bucket()}/landing"
    with pytest.raises(StorageError, match=f"landing zone {url}: cannot list it .*EndpointConnectionError"):
        landed_days(url, {"endpoint_url": f"http://127.0.0.1:{free_port()}"})
    missing = "landing zone s3://no-such-bucket-here/landing: the bucket 'no-such-bucket-here' does not exist"
    with pytest.raises(StorageError, match=missing):
        landed_days("s3://no-such-bucket-here/landing", {"endpoint_url": s3_server.endpoint})


def test_refused_credentials_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, s3_server: MotoServer
) -> None:
    # moto checks credentials against its IAM once this many unauthenticated calls have passed (none).
    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")
    strict = MotoServer(tmp_path)
    monkeypatch.delenv("INITIAL_NO_AUTH_ACTION_COUNT")
    try:
        url = "s3://some-bucket/landing"
        with pytest.raises(MDSError, match=f"landing zone {url}: cannot list it .*PermissionError.*Access Key Id"):
            landed_days(url, {"endpoint_url": strict.endpoint, "key": "nobody", "secret": "wrong"})
    finally:
        strict.stop()
