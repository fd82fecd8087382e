"""A version never mixes columns, and the published pointer never disagrees with the root's index.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mds_core import LocalDataset, MDSWriter
from mds_core.errors import MergeError, StorageError
from mds_core.versions import ShardSet
from tests.versions.conftest import refusing_to_write


def _commit(shard_set: ShardSet, mode: str, columns: dict[str, str], ids: range, **kwargs):
    with shard_set.transaction(mode, **kwargs) as tx, MDSWriter(out=tx.out, columns=columns) as writer:
        for i in ids:
            writer.write({name: (i if encoding == "int" else str(i)) for name, encoding in columns.items()})
    return tx


def test_an_append_with_other_columns_is_refused_and_its_shards_kept(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    _commit(shard_set, "overwrite", {"id": "int"}, range(5))
    with pytest.raises(
        MergeError,
        match=r"version 1 and transaction .* have different columns.*"
        r"\{id: int\}; \{id: str\}.*'overwrite'\) to start afresh",
    ):
        _commit(shard_set, "append", {"id": "str"}, range(5, 10))
    assert [v.version for v in shard_set.versions()] == [1] and shard_set.published() == 1
    [pending] = [p for p in (tmp_path / "set" / "data").iterdir() if p.name != shard_set.version(1).transaction]
    assert (pending / "index.json").exists()  # kept, to be committed with mode='overwrite'
    info = shard_set.commit(pending.name, "overwrite")
    assert info.version == 2 and info.columns == {"id": "str"}


def test_an_append_with_the_same_columns_in_another_order_of_keys_is_accepted(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    _commit(shard_set, "overwrite", {"id": "int", "name": "str"}, range(3))
    tx = _commit(shard_set, "append", {"name": "str", "id": "int"}, range(3, 6))  # columns are sorted by name
    assert tx.version.rows == 6


def test_published_agrees_with_the_root_index_after_a_publish_dies_halfway(tmp_path: Path) -> None:
    root = tmp_path / "set"
    shard_set = ShardSet(str(root))
    _commit(shard_set, "overwrite", {"id": "int"}, range(5))
    _commit(shard_set, "append", {"id": "int"}, range(5, 9), publish=False)
    assert shard_set.published() == 1

    dying = ShardSet(str(root))
    dying.store = refusing_to_write(dying.store, "published.json", "killed between the two writes of publish")
    with pytest.raises(StorageError, match="killed"):
        dying.publish(2)
    # The root index.json (what every plain reader reads) is version 2's; published() says so too.
    assert len(LocalDataset(str(root))) == 9
    assert json.loads((root / "_versions" / "published.json").read_text())["version"] == 1
    assert shard_set.published() == 2
    shard_set.publish(2)  # publishing again repairs the record
    assert json.loads((root / "_versions" / "published.json").read_text()) == {
        "version": 2,
        "fingerprint": shard_set.version(2).fingerprint,
        "history": [1],
    }
    assert shard_set.published() == 2


def test_published_is_none_before_any_publish(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    _commit(shard_set, "overwrite", {"id": "int"}, range(3), publish=False)
    assert shard_set.published() is None


def test_the_publish_command_rolls_back(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mds_core import cli

    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    _commit(shard_set, "overwrite", {"id": "int"}, range(5))
    _commit(shard_set, "append", {"id": "int"}, range(5, 9))
    assert shard_set.published() == 2
    result = CliRunner().invoke(cli.main, ["versions", "publish", root, "1"])
    assert result.exit_code == 0 and result.output == f"published version 1 of {root} (was 2)\n"
    assert shard_set.published() == 1 and len(LocalDataset(root)) == 5
    missing = CliRunner().invoke(cli.main, ["versions", "publish", root, "9"])
    assert missing.exit_code == 2 and "no version 9; versions here: [1, 2]" in missing.output
