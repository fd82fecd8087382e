"""Set-up for Amazon S3 and S3-compatible stores (s3fs): ``s3://`` and ``s3a://``.

The endpoint comes from the ``endpoint_url`` option or ``S3_ENDPOINT_URL`` (MinIO, Ceph, R2, a test
server), as in Mosaic Streaming; the variable reaches subprocesses (ranks, DataLoader workers) too.
The client makes one attempt per call: ``RemoteStore`` counts the attempts itself (``download_retry``),
and botocore's and s3fs's own retries would multiply them. Missing credentials are not retried at all.
A download's GET also bypasses s3fs's retry loop (``get_file``): even set to one attempt, that loop sleeps
0.1 s after a ``SlowDown`` before raising it, in the download's transfer slot, where ``RemoteStore`` gives
the slot to the next shard while a throttled file waits. So does a range read (``read_range``), which also
refuses an answer of the wrong length before reading its body.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from mds_core.errors import chain_of
from mds_core.storage.transfer_limits import Truncated

# Connections one client keeps open at most (botocore's default is 10): a first batch read by byte ranges
# sends a request per sample, a few hundred at once (``mds_core.streaming.ranged``).
MAX_CONNECTIONS = 64


def client_settings(
    timeout: float | None, options: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(client_kwargs, config_kwargs, the other options) for ``options``: what both S3 clients here are built with.

    The endpoint, one attempt per call, ``MAX_CONNECTIONS`` and the timeouts, unless the options set them.
    """
    options = dict(options)
    endpoint = options.pop("endpoint_url", None) or os.environ.get("S3_ENDPOINT_URL") or None
    client_kwargs = dict(options.pop("client_kwargs", None) or {})
    if endpoint:
        client_kwargs.setdefault("endpoint_url", endpoint)
    config_kwargs = dict(options.pop("config_kwargs", None) or {})
    config_kwargs.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    config_kwargs.setdefault("max_pool_connections", MAX_CONNECTIONS)
    if timeout is not None:
        config_kwargs.setdefault("connect_timeout", min(timeout, 30))
        config_kwargs.setdefault("read_timeout", timeout)
    return client_kwargs, config_kwargs, options


def filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """(S3FileSystem, ``bucket/key``) for an ``s3://`` or ``s3a://`` URL."""
    import s3fs

    client_kwargs, config_kwargs, options = client_settings(timeout, options)
    fs = s3fs.S3FileSystem(
        client_kwargs=client_kwargs, config_kwargs=config_kwargs, skip_instance_cache=True, **options
    )
    fs.retries = 1
    return fs, path_of(url)


def get_file(fs: Any) -> Any:
    """The download of one object as one GET, with no sleep after an error.

    The body is written to the local file as it arrives, as s3fs's ``_get_file`` does for a file of one part.
    """
    return functools.partial(_get_file_once, fs)


async def _get_file_once(fs: Any, rpath: str, lpath: str, callback: Any = None) -> None:
    from fsspec.callbacks import DEFAULT_CALLBACK
    from s3fs.core import version_id_kw

    callback = callback or DEFAULT_CALLBACK
    bucket, key, version = fs.split_path(rpath)
    answer = await _call_once(fs, "get_object", Bucket=bucket, Key=key, **version_id_kw(version), **fs.req_kw)
    body = answer["Body"]
    try:
        callback.set_size(answer.get("ContentLength"))
        with open(lpath, "wb") as out:
            while chunk := await body.read(1 << 16):
                callback.relative_update(out.write(chunk))
    finally:
        body.close()


def read_range(fs: Any) -> Any:
    """The read of bytes ``[begin, end)`` of one object as one GET with a ``Range`` header."""
    return functools.partial(_read_range_once, fs)


async def _read_range_once(fs: Any, rpath: str, begin: int, end: int) -> bytes:
    from s3fs.core import version_id_kw

    bucket, key, version = fs.split_path(rpath)
    ranged = {"Range": f"bytes={begin}-{end - 1}"}
    answer = await _call_once(fs, "get_object", Bucket=bucket, Key=key, **ranged, **version_id_kw(version), **fs.req_kw)
    body = answer["Body"]
    try:
        require_range_length(answer, begin, end)
        data: bytes = await body.read()
        return data
    finally:
        body.close()


def require_range_length(answer: Any, begin: int, end: int) -> None:
    """Refuse, unread, a ranged GET's answer whose length is not ``end - begin``.

    A store that ignores ``Range`` sends the whole object, 256 times for a first batch.
    """
    if answer.get("ContentLength") != end - begin:
        raise Truncated(f"bytes {begin}-{end - 1}: the store answers {answer.get('ContentLength')} bytes")


async def _call_once(fs: Any, method: str, **kwargs: Any) -> Any:
    """``fs._call_s3`` without its retry loop: the request's answer, or s3fs's translation of its error."""
    from s3fs.errors import translate_boto_error

    await fs.set_session()
    call = getattr(await fs.get_s3(kwargs.get("Bucket")), method)
    try:
        return await call(**fs._get_s3_method_kwargs(call, **kwargs))
    except Exception as err:
        raise translate_boto_error(err) from err


def path_of(url: str) -> str:
    """``bucket/key`` of an ``s3://`` or ``s3a://`` URL: the filesystem's path, known before its client is built."""
    return url.split("://", 1)[1]


CREDENTIALS_ADVICE = (
    "S3 needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile of "
    '~/.aws/credentials), or pass key= and secret= in storage_options; see "S3 credentials" in docs/remote-storage.md'
)


def credentials_advice(err: BaseException) -> str | None:
    """What to set when botocore found no credentials (or only half of them), which no retry can fix; else None."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    missing = (NoCredentialsError, PartialCredentialsError)
    return CREDENTIALS_ADVICE if any(isinstance(cause, missing) for cause in chain_of(err)) else None  # s3fs wraps it


def reopen_options(inherited: Any) -> dict[str, Any]:
    """What a forked child's S3FileSystem takes from the one it inherited: its aiobotocore session.

    The session holds credentials and the parsed S3 API model, no connection nor event loop; making a
    client from it takes ~10 ms, against 0.1-0.3 s for a new session, in every DataLoader worker of
    every epoch. s3fs leaves a session it was given open (it does not own it).
    """
    session = getattr(inherited, "session", None)
    return {"session": session} if session is not None else {}


def create_if_absent(fs: Any, path: str, data: bytes) -> bool:
    """A conditional PUT (``If-None-Match: *``): False when the store answers 412, the object exists."""
    try:
        fs.pipe_file(path, data, mode="create")
        return True
    except FileExistsError:
        return False
    except OSError as err:
        if "PreconditionFailed" in str(err) or "412" in str(err):
            return False
        raise
