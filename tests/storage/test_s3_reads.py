"""S3 reads through botocore alone (``mds_core.storage.s3_reads``), on the loopback S3 server.

A stream reads its index and shards without importing s3fs (0.33 s of a fresh process's start); writes and
listings still go through s3fs; storage options reach the reader, and one it does not know sends reads to s3fs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mds_core import MDSWriter
from mds_core.errors import ConfigurationError
from mds_core.storage.remote import open_store

COLUMNS = {"id": "int", "text": "str"}


def _write(url: str, n: int = 60) -> None:
    with MDSWriter(out=url, columns=COLUMNS, size_limit=1024) as writer:
        for i in range(n):
            writer.write({"id": i, "text": f"sample {i}"})


def test_a_fresh_process_streams_a_dataset_without_importing_s3fs(s3_server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    _write(url)
    script = (
        "import json, sys\n"
        "from mds_core import StreamingDataset\n"
        f"dataset = StreamingDataset(remote={url!r}, local={str(tmp_path / 'cache')!r}, batch_size=4)\n"
        "ids = sorted(int(sample['id']) for sample in dataset)\n"
        "loaded = [name for name in ('s3fs', 'aiobotocore', 'aiohttp', 'fsspec') if name in sys.modules]\n"
        "print(json.dumps({'ids': ids, 'loaded': loaded}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ, check=True)
    assert json.loads(done.stdout) == {"ids": list(range(60)), "loaded": []}


def test_writes_and_listings_use_s3fs_and_reads_do_not(s3_server) -> None:
    store = open_store(f"s3://{s3_server.new_bucket()}/data")
    store.write_bytes("a/one.txt", b"one")
    assert store.list() == ["a/one.txt"]
    reads = store.reader
    assert store.read_bytes("a/one.txt") == b"one" and store.read_ranges([("a/one.txt", 1, 3)]) == [b"ne"]
    assert type(reads).__name__ == "S3Reads" and type(store.fs).__name__ == "S3FileSystem"


def test_an_option_the_reader_does_not_know_sends_reads_to_s3fs(s3_server) -> None:
    """s3fs gives ``requester_pays`` its meaning: the reader must not read as if it were not there."""
    url = f"s3://{s3_server.new_bucket()}/data"
    open_store(url).write_bytes("one.txt", b"one")
    store = open_store(url, storage_options={"requester_pays": False})
    assert store.read_bytes("one.txt") == b"one"
    assert store.reader is None and type(store.fs).__name__ == "S3FileSystem"


def test_credentials_and_endpoint_in_storage_options_reach_the_reader(
    s3_server, no_credentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{s3_server.new_bucket()}/data"
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    open_store(url).write_bytes("one.txt", b"one")
    for name in ("S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    with pytest.raises(ConfigurationError, match="NoCredentialsError"):
        open_store(url, storage_options={"endpoint_url": s3_server.endpoint}).read_bytes("one.txt")
    options = {"endpoint_url": s3_server.endpoint, "key": "testing", "secret": "testing"}
    store = open_store(url, storage_options=options)
    assert store.read_bytes("one.txt") == b"one" and store._fs is None  # the reader alone
