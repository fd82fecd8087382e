"""Finding 9 of the review: a pinned version's index must be the one its manifest names by fingerprint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.errors import InvalidIndexError
from mds_core.versions import ShardSet
from tests.security.conftest import commit_ids


def _read(root: str, cache: Path, jobs: Path) -> list[int]:
    dataset = StreamingDataset(remote=root, local=str(cache), version=1, batch_size=1, job_root=str(jobs))
    return [int(sample["x"]) for sample in dataset]


def test_an_index_replaced_on_the_store_is_refused_and_not_cached(tmp_path: Path) -> None:
    """Another version's index copied over version 1's: it parses, but it is not what version 1 committed."""
    root = tmp_path / "set"
    shard_set = ShardSet(str(root))
    commit_ids(shard_set, range(4))
    commit_ids(shard_set, range(10, 16))
    first, second = (shard_set.version(n).index for n in (1, 2))
    (root / first).write_bytes((root / second).read_bytes())
    with pytest.raises(InvalidIndexError, match=rf"{first}: its fingerprint is \w+, but version 1's manifest records"):
        _read(str(root), tmp_path / "cache", tmp_path)
    assert not (tmp_path / "cache" / "index.json").exists()
    assert not (tmp_path / "cache" / ".mds-cache" / "version-index.json").exists()


def test_a_cached_index_is_reused_only_with_the_record_of_its_check(tmp_path: Path) -> None:
    """A record from before the check (no fingerprint), or one for other bytes, sends the stream back to
    the store, where the index is checked against its manifest again."""
    root = tmp_path / "set"
    shard_set = ShardSet(str(root))
    commit_ids(shard_set, range(4))
    cache = tmp_path / "cache"
    assert _read(str(root), cache, tmp_path) == [0, 1, 2, 3]
    record_path = cache / ".mds-cache" / "version-index.json"
    record = json.loads(record_path.read_text())
    assert record["fingerprint"] == shard_set.version(1).fingerprint
    del record["fingerprint"]
    record_path.write_text(json.dumps(record))
    (cache / "index.json").write_text("{}")  # would fail to parse if it were trusted
    assert _read(str(root), cache, tmp_path) == [0, 1, 2, 3]
    assert json.loads(record_path.read_text())["fingerprint"] == shard_set.version(1).fingerprint
    assert os.path.getsize(cache / "index.json") > 2
