"""The daily path (transaction, commit, publish, latest) costs the same requests after years of history."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from mds_core.versions import ShardSet
from mds_core.versions.manifest import HEAD, manifest_name
from tests.versions.conftest import refusing_to_write, write_day
from testsupport.s3 import object_gets

# The requests latest() makes on the loopback S3 server, whatever the history: one GET each for the hint, the
# newest manifest and the probe past it (answered 404). docs/versions.md quotes it; tests/docs checks the quote.
LATEST_REQUESTS = 3


def _commit(shard_set: ShardSet, ids: range, **kwargs):
    with shard_set.transaction("append", **kwargs) as tx:
        write_day(tx.out, "d", ids)
    return tx.version


def _latest(shard_set: ShardSet) -> int | None:
    """The newest version's number (None: no version yet)."""
    latest = shard_set.latest()
    return latest.version if latest is not None else None


def _grow(shard_set: ShardSet, versions: int) -> None:
    """Two real versions, then manifests up to ``versions`` written directly (each a copy of version 2,
    with its own number), as years of daily commits would leave them; the hint names the newest."""
    _commit(shard_set, range(10))
    _commit(shard_set, range(10, 20))
    second = json.loads(shard_set.store.read_bytes(manifest_name(2)))
    for number in range(3, versions + 1):
        manifest = {**second, "version": number, "parent": number - 1, "transaction": f"old-{number}"}
        shard_set.store.write_bytes(manifest_name(number), json.dumps(manifest).encode())
    shard_set.store.write_bytes(HEAD, json.dumps({"version": versions}).encode())
    shard_set.publish(versions)


def _day(shard_set: ShardSet, server) -> tuple[list, list]:
    """The requests of one day: those of latest(), then those of a transaction written, committed and published."""
    since = server.log_position()
    shard_set.latest()
    latest = server.requests(since)
    mid = server.log_position()
    _commit(shard_set, range(100, 120))
    return latest, server.requests(mid)


def _history_listings(requests: list) -> list:
    """Listings of ``_versions/`` itself (a probe for an absent file may list its name as a folder)."""
    return [
        r
        for r in requests
        if "list-type" in r.query
        and parse_qs(r.query).get("prefix") in (["set/_versions/"], ["set/_versions"], ["set/"], ["set"])
    ]


@pytest.mark.slow  # 300 versions committed (11 s)
def test_a_day_costs_the_same_requests_after_2_or_300_versions(s3_server) -> None:
    short, long = (ShardSet(f"s3://{s3_server.new_bucket()}/set") for _ in range(2))
    _grow(short, 2)
    _grow(long, 300)  # 600 keys in _versions/; a listing would also grow past a page with time
    (short_latest, short_day), (long_latest, long_day) = (_day(s, s3_server) for s in (short, long))
    assert len(long_latest) == LATEST_REQUESTS, _methods(long_latest)  # docs/versions.md quotes it
    assert _methods(short_latest) == _methods(long_latest)  # the hint, the newest, one probe past it
    assert _methods(short_day) == _methods(long_day), (_methods(short_day), _methods(long_day))
    assert not _history_listings(long_latest + long_day)
    gets = object_gets(long_latest, long.store.url.split("/")[2])
    # the hint, the newest, and the probe past it, which finds nothing
    assert gets == {"set/_versions/head.json": 1, "set/_versions/00000300.json": 1, "set/_versions/00000301.json": 1}
    assert [r.status for r in long_latest if "00000301.json" in r.path] == [404]
    assert _latest(long) == 301 and long.published() == 301 and _latest(short) == 3
    assert json.loads(long.store.read_bytes(HEAD)) == {"version": 301}


def _methods(requests: list) -> Counter:
    return Counter(r.method for r in requests)


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "set")


def test_a_set_without_the_hint_is_found_by_listing_and_gets_one(root: str) -> None:
    shard_set = ShardSet(root)
    _commit(shard_set, range(5))
    _commit(shard_set, range(5, 10))
    shard_set.store.delete(HEAD)  # as a set committed by an older release
    assert _latest(shard_set) == 2
    assert _commit(shard_set, range(10, 15)).version == 3
    assert json.loads(shard_set.store.read_bytes(HEAD)) == {"version": 3}


@pytest.mark.parametrize("hint", [b'{"version": 1}', b'{"version": 99}', b"not json", b'{"version": true}'])
def test_a_stale_or_damaged_hint_only_costs_probes(root: str, hint: bytes) -> None:
    shard_set = ShardSet(root)
    for n in range(3):
        _commit(shard_set, range(5 * n, 5 * n + 5))
    shard_set.store.write_bytes(HEAD, hint)
    assert _latest(shard_set) == 3
    assert _commit(shard_set, range(50, 55)).version == 4
    assert json.loads(shard_set.store.read_bytes(HEAD)) == {"version": 4}


def test_a_commit_retried_after_dying_before_the_hint_returns_its_version(s3_server) -> None:
    shard_set = ShardSet(f"s3://{s3_server.new_bucket()}/set")
    _commit(shard_set, range(10))
    tx = shard_set.transaction("append")
    write_day(tx.out, "d", range(10, 20))
    done = shard_set.commit(tx.id, "append", publish=False)
    shard_set.store.write_bytes(HEAD, json.dumps({"version": 1}).encode())  # it died before the hint
    since = s3_server.log_position()
    for again in (shard_set.commit(tx.id, "append"), shard_set.commit(tx.id, "append", parent=1, seen=1)):
        assert again == done
    assert not _history_listings(s3_server.requests(since))  # found without listing the history
    assert [v.version for v in shard_set.versions()] == [1, 2] and shard_set.published() == 2
    assert json.loads(shard_set.store.read_bytes(HEAD)) == {"version": 2}  # the retry repaired the hint


def test_a_retry_of_a_transaction_named_by_hand_finds_its_version_by_listing(root: str) -> None:
    shard_set = ShardSet(root)
    _commit(shard_set, range(10))
    write_day(f"{root}/data/by-hand", "d", range(10, 20))
    first = shard_set.commit("by-hand", "append")
    assert shard_set.commit("by-hand", "append") == first and len(shard_set.versions()) == 2


def test_vacuum_keeps_the_hint_and_the_newest_and_repairs_a_stale_hint(root: str) -> None:
    shard_set = ShardSet(root)
    for n in range(4):
        _commit(shard_set, range(5 * n, 5 * n + 5), publish=n == 0)
    shard_set.store.write_bytes(HEAD, json.dumps({"version": 1}).encode())
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    report = shard_set.vacuum(newer_than=future, grace=dt.timedelta(0))
    assert report.kept_versions == [1, 4] and report.removed_versions == [2, 3]  # published and newest
    assert json.loads(shard_set.store.read_bytes(HEAD)) == {"version": 4}
    assert _latest(shard_set) == 4 and _commit(shard_set, range(90, 95)).version == 5


def test_a_hint_that_cannot_be_written_does_not_fail_the_commit(root: str, caplog) -> None:
    shard_set = ShardSet(root)
    _commit(shard_set, range(5))
    shard_set.store = refusing_to_write(shard_set.store, HEAD, "the hint cannot be written")
    assert _commit(shard_set, range(5, 10)).version == 2 and "could not update the hint" in caplog.text
    assert json.loads(shard_set.store.read_bytes(HEAD)) == {"version": 1}  # stale: probing finds version 2
    assert _latest(ShardSet(root)) == 2 and ShardSet(root).published() == 2


def test_newest_first_reads_back_from_the_tip_and_stops_at_since_or_a_gap(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    _grow(shard_set, 6)
    assert [v.version for v in shard_set.newest_first()] == [6, 5, 4, 3, 2, 1]
    older = shard_set.version(3)
    stamp = {**json.loads(shard_set.store.read_bytes(manifest_name(3))), "created": "2020-01-01T00:00:00+00:00"}
    shard_set.store.write_bytes(manifest_name(3), json.dumps(stamp).encode())  # made long before the others
    since = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    assert older.created > stamp["created"]
    assert [v.version for v in shard_set.newest_first(since)] == [6, 5, 4]  # 3 is older than since: the walk ends
    shard_set.store.delete(manifest_name(5))  # vacuumed
    assert [v.version for v in shard_set.newest_first()] == [6]
