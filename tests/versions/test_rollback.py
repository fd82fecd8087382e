"""Publication history in published.json, rollback(), and ``mds versions rollback``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mds_core import LocalDataset, MDSWriter, cli
from mds_core.errors import MDSError, NothingToRollBackError
from mds_core.versions import ShardSet
from mds_core.versions.manifest import PUBLISHED, Published, parse_published
from mds_core.versions.publication import history_before, pushed, rollback_target


def _commit(shard_set: ShardSet, ids: range, **kwargs) -> int:
    with shard_set.transaction("append", **kwargs) as tx, MDSWriter(out=tx.out, columns={"id": "int"}) as writer:
        for i in ids:
            writer.write({"id": i})
    assert tx.version is not None  # committed
    return tx.version.version


def _record(shard_set: ShardSet) -> dict:
    return json.loads(shard_set.store.read_bytes(PUBLISHED))


def test_rollback_goes_back_one_publication_at_a_time(root: str) -> None:
    shard_set = ShardSet(root)
    for n in range(3):
        _commit(shard_set, range(10 * n, 10 * n + 5))
    assert _record(shard_set)["history"] == [1, 2]
    assert shard_set.rollback() == 2 and shard_set.published() == 2 and _record(shard_set)["history"] == [1]
    assert shard_set.rollback() == 1 and shard_set.published() == 1  # further back, not back to 3
    with pytest.raises(NothingToRollBackError, match=rf"{root}: nothing to roll back to: version 1 is published"):
        shard_set.rollback()
    assert shard_set.published() == 1 and isinstance(NothingToRollBackError("x"), MDSError)
    shard_set.publish(3)
    assert _record(shard_set)["history"] == [1] and shard_set.rollback() == 1


def test_rollback_skips_versions_vacuumed_since(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    for n in range(4):
        _commit(shard_set, range(10 * n, 10 * n + 5), publish=n == 0)
    for number in (3, 2, 4):
        shard_set.publish(number)
    assert _record(shard_set)["history"] == [1, 3, 2]
    shard_set.vacuum(keep_last=2)  # keeps 3 and 4: 1 and 2 go
    assert shard_set.rollback() == 3 and len(LocalDataset(root)) == 15
    with pytest.raises(NothingToRollBackError, match=r"recorded: \[1\]"):  # 1 is gone too
        shard_set.rollback()


def test_an_older_published_json_without_history_still_reads(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    _commit(shard_set, range(5))
    _commit(shard_set, range(5, 9))
    record = _record(shard_set)
    shard_set.store.write_bytes(PUBLISHED, json.dumps({"version": 2, "fingerprint": record["fingerprint"]}).encode())
    assert shard_set.published() == 2
    with pytest.raises(NothingToRollBackError):
        shard_set.rollback()
    shard_set.publish(1)
    assert _record(shard_set)["history"] == [2] and shard_set.rollback() == 2


def test_the_history_is_validated_and_capped() -> None:
    assert parse_published(b'{"version": 2, "fingerprint": "f"}', "p")["history"] == []
    for bad in ('"x"', "[0]", "[true]", '["1"]', "{}"):
        with pytest.raises(MDSError, match="history"):
            parse_published(f'{{"version": 2, "fingerprint": "f", "history": {bad}}}'.encode(), "p")
    long: Published = {"version": 99, "fingerprint": "f", "history": list(range(1, 99))}
    assert pushed(long, 100) == list(range(50, 100))  # at most HISTORY_LIMIT, the oldest dropped
    assert pushed(long, 99) == list(range(49, 99)) and pushed(None, 3) == []  # republished: nothing pushed


def test_an_interrupted_publish_or_rollback_leaves_a_history_that_makes_sense() -> None:
    record: Published = {"version": 5, "fingerprint": "f", "history": [2, 3, 4]}
    assert history_before(record, 5) == [2, 3, 4]
    assert history_before(record, 6) == [2, 3, 4, 5]  # publish(6) died before its record: 5 came before it
    assert history_before(record, 3) == [2]  # a rollback to 3 died before its record
    assert rollback_target([2, 3, 4], 5, lambda n: n if n != 4 else None) == (3, [2])


def test_the_rollback_command(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    _commit(shard_set, range(5))
    _commit(shard_set, range(5, 9))
    runner = CliRunner()
    result = runner.invoke(cli.main, ["versions", "rollback", root])
    assert result.exit_code == 0 and result.output == f"rolled back {root} to version 1 (was 2)\n"
    assert shard_set.published() == 1 and len(LocalDataset(root)) == 5
    shard_set.publish(2)
    as_json = runner.invoke(cli.main, ["versions", "rollback", root, "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output) == {"root": root, "published": 1, "was": 2}
    none = runner.invoke(cli.main, ["versions", "rollback", root])
    assert none.exit_code == 2 and f"error: {root}: nothing to roll back to" in none.output
