"""A state dict names the data it was taken on: each stream's root, shard-set version and its lineage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.errors import ResumeError
from mds_core.streaming.lineage import stream_root
from mds_core.streaming.stream import Stream
from mds_core.versions import ShardSet
from tests.streaming.support import ids, write_ids
from tests.versions.conftest import write_day

SOURCE_V1 = {"source": {"table_uri": "s3://lake/events", "table_id": "4f1c-77", "versions": [0, 1, 2]}}
SOURCE_V2 = {"source": {"table_uri": "s3://lake/events", "table_id": "4f1c-77", "versions": [3]}}
REFERENCE_KEYS = ["epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"]


def _two_versions(root: str) -> None:
    """Version 1: ids 0-39 from table versions 0-2; version 2 appends ids 40-79 from table version 3.

    Version 2's manifest also keeps the table's schema, as ``delta_lineage`` writes it: no state dict carries it.
    """
    shard_set = ShardSet(root)
    v2 = {"source": SOURCE_V2["source"] | {"schema": '{"type":"struct","fields":[]}'}}
    for mode, lineage, rows in (("overwrite", SOURCE_V1, range(40)), ("append", v2, range(40, 80))):
        with shard_set.transaction(mode, lineage=lineage) as tx:
            write_day(tx.out, "d", rows)


def _dataset(root: str, tmp_path: Path, version: int, cache: str, **kwargs) -> StreamingDataset:
    return StreamingDataset(
        remote=root,
        local=str(tmp_path / cache),
        version=version,
        batch_size=4,
        job_root=str(tmp_path / cache / "job"),
        **kwargs,
    )


def test_the_state_names_root_version_and_lineage(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    _two_versions(root)
    state = _dataset(root, tmp_path, 2, "c2").state_dict(8, from_beginning=True)
    assert list(state) == [*REFERENCE_KEYS, "fingerprint", "versions", "data"]
    assert state["versions"] == [2]
    assert state["data"] == [{"root": root, "version": 2, "lineage": SOURCE_V2}]
    state["data"][0]["lineage"]["source"]["versions"].append(99)  # a caller's copy: the next state is unchanged
    assert _dataset(root, tmp_path, 1, "c1").state_dict(0, True)["data"][0]["lineage"] == SOURCE_V1


def test_a_plain_folder_is_named_without_a_version(tmp_path: Path) -> None:
    folder = str(write_ids(tmp_path / "plain", 20))
    state = StreamingDataset(local=folder, batch_size=4, job_root=str(tmp_path / "job")).state_dict(4, True)
    assert state["data"] == [{"root": folder, "version": None, "lineage": None}]


def test_resuming_on_the_same_version_continues_the_order(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    _two_versions(root)
    first = _dataset(root, tmp_path, 2, "c1", shuffle=True)
    whole = ids(first)
    state = first.state_dict(12, from_beginning=True)
    resumed = _dataset(root, tmp_path, 2, "c2", shuffle=True)
    resumed.load_state_dict(state)
    assert ids(resumed) == whole[12:]


def test_resuming_on_another_version_is_refused_naming_the_stream(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    _two_versions(root)
    first = _dataset(root, tmp_path, 1, "c1")
    ids(first)  # a state taken before any iteration would start the epoch afresh
    state = first.state_dict(8, from_beginning=True)
    other = _dataset(root, tmp_path, 2, "c2")
    expected = (
        f"state dict was taken on shard-set version(s) [1], but this dataset reads [2] "
        f"(stream 0 at {root}: version 1 in the state, 2 here); resume on the same version, "
        "or pass allow_other_data=True to load_state_dict to continue anyway"
    )
    with pytest.raises(ResumeError, match=f"^{re.escape(expected)}$"):
        other.load_state_dict(state)
    other.load_state_dict(state, allow_other_data=True)
    assert ids(other) == ids(_dataset(root, tmp_path, 2, "c3"))[8:]  # the position is kept, on version 2's samples


def test_a_pinned_state_is_refused_by_an_unpinned_stream(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    _two_versions(root)
    state = _dataset(root, tmp_path, 1, "c1").state_dict(0, from_beginning=True)
    plain = StreamingDataset(remote=root, local=str(tmp_path / "c3"), batch_size=4, job_root=str(tmp_path / "j3"))
    with pytest.raises(ResumeError, match=re.escape(f"(stream 0 at {root}: version 1 in the state, unpinned here)")):
        plain.load_state_dict(state)


def test_a_root_is_named_without_its_credentials(tmp_path: Path) -> None:
    stream = Stream(remote="ftp://alice:secret@files.example/set", local=str(tmp_path / "cache"))
    assert stream_root(stream) == "ftp://***@files.example/set"
