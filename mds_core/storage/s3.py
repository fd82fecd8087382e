"""Set-up for Amazon S3 and S3-compatible stores (s3fs): ``s3://`` and ``s3a://``.

The endpoint comes from the ``endpoint_url`` option or ``S3_ENDPOINT_URL`` (MinIO, Ceph, R2, a test
server), as in Mosaic Streaming; the variable reaches subprocesses (ranks, DataLoader workers) too.
The client makes one attempt per call: ``RemoteStore`` counts the attempts itself (``download_retry``),
and botocore's and s3fs's own retries would multiply them. Missing credentials are not retried at all.
"""

from __future__ import annotations

import os
from typing import Any

from mds_core.errors import chain_of


def filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """(S3FileSystem, ``bucket/key``) for an ``s3://`` or ``s3a://`` URL."""
    import s3fs

    options = dict(options)
    endpoint = options.pop("endpoint_url", None) or os.environ.get("S3_ENDPOINT_URL") or None
    client_kwargs = dict(options.pop("client_kwargs", {}))
    if endpoint:
        client_kwargs.setdefault("endpoint_url", endpoint)
    config_kwargs = dict(options.pop("config_kwargs", {}))
    config_kwargs.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    if timeout is not None:
        config_kwargs.setdefault("connect_timeout", min(timeout, 30))
        config_kwargs.setdefault("read_timeout", timeout)
    fs = s3fs.S3FileSystem(
        client_kwargs=client_kwargs, config_kwargs=config_kwargs, skip_instance_cache=True, **options
    )
    fs.retries = 1
    return fs, path_of(url)


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
