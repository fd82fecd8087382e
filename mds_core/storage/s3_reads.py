"""S3 reads through botocore alone: a stream's index, shards and byte ranges, without importing s3fs.

A stream's first request waits for its client. Importing s3fs costs about 0.33 s after ``import torch`` (aiobotocore
brings aiohttp, 0.2 s of it) and building its client 0.1 s more; botocore alone reaches the first shard's bytes in
0.22-0.25 s from a fresh process, as boto3 does for the peers. So ``RemoteStore`` reads whole files and byte ranges
of S3 with ``S3Reads`` (``StoreKind.reader``), and writes, lists and deletes with s3fs, built when first needed.

Both clients are set up from the same storage options. An option this module does not know (``requester_pays``,
``version_aware``, ``session``...) sends reads to s3fs too, so s3fs keeps its meaning (``reader`` returns None).
Both are built with the same settings (``s3.client_settings``): one attempt per call, as ``RemoteStore`` counts them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mds_core.storage.s3 import client_settings, require_range_length

# The storage options read the same way by both clients; any other one leaves reads to s3fs.
KNOWN_OPTIONS = frozenset(
    {"key", "secret", "token", "anon", "profile", "endpoint_url", "client_kwargs", "config_kwargs"}
)
_MISSING = {"NoSuchKey", "NoSuchBucket", "NotFound"}
_REFUSED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}


class S3Reads:
    """Whole objects and byte ranges of S3 by one botocore client, shared by the process's threads.

    Paths are ``bucket/key``, as s3fs's. ``session`` is kept for a forked child to build its client from
    (``reader``): it holds the credentials and the parsed API model, no connection.
    """

    def __init__(self, session: Any, client: Any, timeout: float | None) -> None:
        self.session, self.client, self.timeout = session, client, timeout

    def open(self, path: str, mode: str = "rb") -> _Body:
        """The object's body, opened once the store answers (``StoreKind.answers_on_open``); the caller closes it."""
        if mode != "rb":
            raise ValueError(f"S3Reads only reads: mode {mode!r}")
        return _Body(self._get(path)["Body"], self.timeout)

    def cat_file(self, path: str) -> bytes:
        """The whole object, in one GET."""
        with self.open(path) as body:
            return body.read()

    def read_range(self, path: str, begin: int, end: int) -> bytes:
        """Bytes ``[begin, end)`` in one GET; an answer of another length (``Range`` ignored) is refused unread."""
        answer = self._get(path, Range=f"bytes={begin}-{end - 1}")
        with _Body(answer["Body"], self.timeout) as body:
            require_range_length(answer, begin, end)
            return body.read()

    def _get(self, path: str, **kwargs: Any) -> Any:
        bucket, _, key = path.partition("/")
        from botocore.exceptions import ClientError

        with _timeouts_named(self.timeout):
            try:
                return self.client.get_object(Bucket=bucket, Key=key, **kwargs)
            except ClientError as err:
                raise translated(err) from err


class _Body:
    """An object's body being read: botocore's, with a socket read past the timeout named as the deadline's."""

    def __init__(self, body: Any, timeout: float | None) -> None:
        self.body, self.timeout = body, timeout

    def read(self, size: int = -1) -> bytes:
        with _timeouts_named(self.timeout):
            data: bytes = self.body.read(None if size < 0 else size)
            return data

    def close(self) -> None:
        self.body.close()

    def __enter__(self) -> _Body:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def _timeouts_named(timeout: float | None) -> Iterator[None]:
    """The read timeout of botocore (set to the transfer's deadline) as the ``TimeoutError`` other clients raise."""
    from botocore.exceptions import ReadTimeoutError

    try:
        yield
    except ReadTimeoutError as err:
        raise TimeoutError(f"did not finish within the {timeout} s timeout") from err


def translated(err: Any) -> BaseException:
    """A missing object or a refusal as the error s3fs raises for it, with the store's message; else ``err``.

    ``FileNotFoundError`` and ``PermissionError`` are not retried; ``throttle_of`` reads ``err``'s response.
    """
    error = err.response.get("Error") or {}
    code = str(error.get("Code") or "")
    status = (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    message = str(error.get("Message") or err)
    if code in _MISSING or status == 404:
        return FileNotFoundError(message)
    if code in _REFUSED or status == 403:
        return PermissionError(message)
    return err  # type: ignore[no-any-return]


def reader(timeout: float | None, options: dict[str, Any], inherited: S3Reads | None = None) -> S3Reads | None:
    """This process's ``S3Reads`` for ``options``; None where an option asks for s3fs.

    Args:
        timeout: the transfer deadline in seconds, or None: bounds the client's connect and read timeouts.
        options: the store's storage options.
        inherited: the reader a forked child inherited: its session is reused, no connection.
    """
    options = {name: value for name, value in options.items() if name != "use_listings_cache"}
    if set(options) - KNOWN_OPTIONS:
        return None
    import botocore.session
    from botocore import UNSIGNED
    from botocore.config import Config

    session = inherited.session if inherited is not None else botocore.session.Session(profile=options.get("profile"))
    client_kwargs, config_kwargs, options = client_settings(timeout, options)
    if options.get("anon"):
        config_kwargs["signature_version"] = UNSIGNED
    credentials = {"aws_access_key_id": "key", "aws_secret_access_key": "secret", "aws_session_token": "token"}
    for argument, option in credentials.items():
        if options.get(option) is not None:
            client_kwargs.setdefault(argument, options[option])
    return S3Reads(session, session.create_client("s3", config=Config(**config_kwargs), **client_kwargs), timeout)
