"""A damaged remote index is reported under its remote URL, the file to repair (issue 40, item 14).

The reader parses the index's copy in its cache, but is told the remote's names (``LocalDataset``'s
``source``): the error names the remote file, and never the cache copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.errors import EmptyStreamError, InvalidIndexError, UnsafeEncodingError
from mds_core.storage.remote import open_store
from mds_core.streaming.local import LocalDataset
from tests.streaming.support import write_ids, write_rows


def _open(remote: str, tmp_path: Path) -> StreamingDataset:
    return StreamingDataset(remote=remote, local=str(tmp_path / "cache-trunc"), job_root=str(tmp_path / "jobs"))


def test_a_truncated_index_on_s3_is_named_by_its_url(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    write_ids(url, 10)
    store = open_store(url)
    text = store.read_bytes("index.json")
    store.write_bytes("index.json", text[: len(text) // 2])
    with pytest.raises(InvalidIndexError) as caught:
        _open(url, tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{url}/index.json: not valid JSON (")
    assert message.endswith("; rewrite the dataset or restore the file")
    assert str(tmp_path) not in message  # the cache's copy is not the file to repair


@pytest.mark.parametrize("store", ["s3", "local"])
def test_an_unsafe_column_is_named_by_the_remote_folder(request, tmp_path: Path, store: str) -> None:
    url = (
        f"s3://{request.getfixturevalue('s3_server').new_bucket()}/pickled" if store == "s3" else str(tmp_path / "src")
    )
    write_rows(url, {"id": "pkl"}, ({"id": i} for i in range(10)))
    with pytest.raises(UnsafeEncodingError) as caught:
        _open(url, tmp_path)
    # The reference's words first (code matches on them), then the remote dataset rather than the cache.
    assert str(caught.value).startswith(f"Column id contains an unsafe type: pkl. {url}: shard 0: unpickling")
    assert "cache-trunc" not in str(caught.value)


def test_a_local_dataset_reports_the_source_it_is_told(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text('{"shards": [], "version": 3}')
    with pytest.raises(InvalidIndexError) as caught:
        LocalDataset(tmp_path, source="s3://bucket/path/")
    assert str(caught.value) == "s3://bucket/path/index.json: index version 3 is not supported (only 2)"
    with pytest.raises(InvalidIndexError) as named:
        LocalDataset(tmp_path, source="s3://bucket/path", index_source="the index of version 4 of s3://bucket/path")
    assert str(named.value).startswith("the index of version 4 of s3://bucket/path: index version 3")


def test_a_damaged_or_empty_local_remote_is_named_by_its_path(tmp_path: Path) -> None:
    remote = write_ids(tmp_path / "source", 10)
    index = json.loads((remote / "index.json").read_text())
    index["shards"][0]["samples"] = "ten"
    (remote / "index.json").write_text(json.dumps(index))
    with pytest.raises(InvalidIndexError) as caught:
        _open(str(remote), tmp_path)
    assert str(caught.value) == f"{remote}/index.json: shard 0: 'samples' must be a non-negative int, got 'ten'"
    empty = write_ids(tmp_path / "empty", 0)
    with pytest.raises(EmptyStreamError) as no_samples:
        StreamingDataset(remote=str(empty), local=str(tmp_path / "c2"), job_root=str(tmp_path / "jobs"))
    assert str(no_samples.value) == f"Stream contains no samples: {empty}/index.json; drop it or write samples"


def test_a_local_dataset_is_still_named_by_its_own_path(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text("{oops")
    with pytest.raises(InvalidIndexError) as caught:
        StreamingDataset(local=str(tmp_path), job_root=str(tmp_path / "jobs"))
    assert str(caught.value).startswith(f"{tmp_path}/index.json: not valid JSON (")
    assert "cache" not in str(caught.value)
