"""The first store errors a new user meets (issue 40, items 18 and 19), on the loopback S3 server.

A missing bucket is found when the writer is made, not after the first shard in an upload thread; an
error of an upload thread reaches the caller without the thread's frames; missing credentials are not
retried, and the error says what to set.
"""

from __future__ import annotations

import re
import traceback
import uuid
from pathlib import Path

import boto3
import pytest

from mds_core import MDSWriter, StreamingDataset
from mds_core.errors import ConfigurationError, MDSError, StoreFileNotFoundError
from mds_core.storage.remote import open_store

CREDENTIALS_ADVICE = (
    "S3 needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile of "
    '~/.aws/credentials), or pass key= and secret= in storage_options; see "S3 credentials" in docs/remote-storage.md'
)


def _frames(err: BaseException) -> list[str]:
    """Every frame of ``err`` and of the errors chained to it, as ``file:function``."""
    frames, seen = [], set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames += [f"{frame.filename}:{frame.name}" for frame in traceback.extract_tb(current.__traceback__)]
        current = current.__cause__ or current.__context__
    return frames


def test_a_missing_bucket_fails_the_writer_at_construction(s3_server, capfd: pytest.CaptureFixture[str]) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    since = s3_server.log_position()
    with pytest.raises(StoreFileNotFoundError) as caught:
        MDSWriter(out=f"s3://{bucket}/datasets/train", columns={"id": "int"})
    assert str(caught.value) == (
        f"s3://{bucket}/datasets/train: the bucket {bucket!r} does not exist (or these credentials cannot see it); "
        "create it or check the URL"
    )
    assert isinstance(caught.value, FileNotFoundError) and caught.value.__cause__ is None
    assert not [r for r in s3_server.requests(since) if r.method in ("PUT", "POST")]  # nothing was written
    assert capfd.readouterr().err == ""


def test_a_missing_bucket_fails_a_reader_at_construction(s3_server, tmp_path: Path) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    with pytest.raises(StoreFileNotFoundError) as caught:
        StreamingDataset(remote=f"s3://{bucket}/train", local=str(tmp_path / "cache"), job_root=str(tmp_path / "j"))
    assert str(caught.value) == (
        f"download of s3://{bucket}/train/index.json failed: FileNotFoundError: The specified bucket does not exist"
    )


def test_an_existing_bucket_costs_one_lookup_and_writes_as_before(s3_server) -> None:
    bucket = s3_server.new_bucket()
    since = s3_server.log_position()
    with MDSWriter(out=f"s3://{bucket}/d", columns={"id": "int"}) as writer:
        writer.write({"id": 1})
    heads = [r for r in s3_server.requests(since) if r.method == "HEAD" and r.path.rstrip("/") == f"/{bucket}"]
    assert len(heads) == 1
    assert open_store(f"s3://{bucket}/d").list() == ["index.json", "shard.00000.mds"]


def test_an_upload_threads_error_reaches_the_caller_without_the_threads_frames(
    s3_server, capfd: pytest.CaptureFixture[str]
) -> None:
    bucket = s3_server.new_bucket()
    writer = MDSWriter(out=f"s3://{bucket}/d", columns={"id": "int"}, size_limit=100)
    boto3.client("s3", endpoint_url=s3_server.endpoint).delete_bucket(Bucket=bucket)  # gone after the check
    with pytest.raises(StoreFileNotFoundError) as caught:
        for i in range(1000):
            writer.write({"id": i})
        writer.finish()
    writer.abort()
    assert re.fullmatch(  # whichever upload failed first: four threads upload
        rf"upload to s3://{bucket}/d/shard\.\d{{5}}\.mds failed: FileNotFoundError: The specified bucket does not exist",
        str(caught.value),
    )
    frames = _frames(caught.value)
    assert frames and not [f for f in frames if "concurrent/futures" in f or f.endswith((":_upload", ":_store"))]
    assert capfd.readouterr().err == ""  # no "Exception in thread ..." either


def test_missing_credentials_are_not_retried_and_say_what_to_set(s3_server, no_credentials) -> None:
    from aiobotocore.session import AioSession

    session = AioSession()
    signed: list[str] = []  # one event per attempt: botocore signs each request it tries to send
    session.register("before-sign.s3", lambda event_name, **_: signed.append(event_name))
    store = open_store("s3://some-bucket/train", retry=5, storage_options={"session": session})
    since = s3_server.log_position()
    with pytest.raises(ConfigurationError) as caught:
        store.read_bytes("index.json")
    assert str(caught.value) == (
        "read of s3://some-bucket/train/index.json failed: NoCredentialsError: Unable to locate credentials; "
        + CREDENTIALS_ADVICE
    )
    assert isinstance(caught.value, MDSError) and type(caught.value.__cause__).__name__ == "NoCredentialsError"
    assert len(signed) == 1  # one attempt of the five allowed
    assert s3_server.requests(since) == []  # and nothing unsigned went out


def test_missing_credentials_stop_a_reader_and_a_writer_at_once(s3_server, no_credentials, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as read:  # the message docs/remote-storage.md shows
        StreamingDataset(
            remote="s3://bucket/datasets/train",
            local=str(tmp_path / "c"),
            download_retry=5,
            job_root=str(tmp_path / "j"),
        )
    assert str(read.value) == (
        "download of s3://bucket/datasets/train/index.json failed: NoCredentialsError: Unable to locate credentials; "
        + CREDENTIALS_ADVICE
    )
    with pytest.raises(ConfigurationError) as write:
        MDSWriter(out="s3://some-bucket/out", columns={"id": "int"}, retry=5)
    assert str(write.value).startswith("lookup of s3://some-bucket/out/index.json failed: NoCredentialsError")
    assert str(write.value).endswith(CREDENTIALS_ADVICE)
