"""merge_index: both call forms, nested partitions, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mds_core import LocalDataset, MDSWriter, merge_index
from mds_core.errors import MergeError


def _part(out: Path, ids: range, columns: dict | None = None) -> Path:
    with MDSWriter(out=str(out), columns=columns or {"id": "int"}, size_limit=150) as writer:
        for i in ids:
            writer.write({"id": i})
    return out / "index.json"


def _ids(root: Path) -> list[int]:
    return [s["id"] for s in LocalDataset(root)]


def test_root_form_merges_sorted_partitions(tmp_path: Path) -> None:
    _part(tmp_path / "b", range(10, 20))
    _part(tmp_path / "a", range(10))
    merge_index(str(tmp_path))
    text = (tmp_path / "index.json").read_text()
    assert text.startswith('{"version": 2, "shards": [')
    assert _ids(tmp_path) == list(range(20))
    assert json.loads(text)["shards"][0]["raw_data"]["basename"] == "a/shard.00000.mds"


def test_list_form_keeps_the_given_order_and_drops_duplicates(tmp_path: Path) -> None:
    a, b = _part(tmp_path / "a", range(5)), _part(tmp_path / "b", range(5, 9))
    merge_index([str(b), str(a), str(b)], str(tmp_path))
    assert _ids(tmp_path) == [5, 6, 7, 8, 0, 1, 2, 3, 4]
    merge_index([(str(a), ""), (str(b), "")], (str(tmp_path), ""))
    assert _ids(tmp_path) == list(range(9))


def test_nested_prefixes_survive(tmp_path: Path) -> None:
    _part(tmp_path / "p0" / "x", range(4))
    _part(tmp_path / "p0" / "y", range(4, 8))
    merge_index(str(tmp_path / "p0"))
    _part(tmp_path / "p1", range(8, 12))
    merge_index(str(tmp_path))  # p0's merged index covers p0/x and p0/y: no duplicates
    basenames = [s["raw_data"]["basename"] for s in json.loads((tmp_path / "index.json").read_text())["shards"]]
    assert basenames[0] == "p0/x/shard.00000.mds" and basenames[-1].startswith("p1/")
    assert _ids(tmp_path) == list(range(12))
    merge_index([str(tmp_path / "p0" / "x" / "index.json")], str(tmp_path))
    assert _ids(tmp_path) == [0, 1, 2, 3]


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(MergeError, match="no partition index.json files"):
        merge_index(str(tmp_path))
    a = _part(tmp_path / "a", range(3))
    with MDSWriter(out=str(tmp_path / "b"), columns={"other": "str"}) as writer:
        writer.write({"other": "z"})
    with pytest.raises(MergeError, match="different columns"):
        merge_index(str(tmp_path))
    with pytest.raises(MergeError, match="must be in a sub-directory of the merged root"):
        merge_index([str(a)], str(tmp_path / "a" / "deeper"))
    with pytest.raises(MergeError, match=r"nope/index.json: no such index.json"):
        merge_index([str(tmp_path / "nope" / "index.json")], str(tmp_path))
    with pytest.raises(MergeError, match=r"nothing to merge: the first argument is \[\]"):
        merge_index([], str(tmp_path))
    with pytest.raises(MergeError, match="out is None"):
        merge_index([str(a / "index.json")], None)
    assert not (tmp_path / "index.json").exists()
