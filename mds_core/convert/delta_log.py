"""A Delta table's transaction log read directly, at a cost that does not grow with the log's length.

delta-rs loads a table by reading every commit since the last checkpoint (without a checkpoint: every commit,
twice), which a sensor that only wants to know "is there a newer version?" should not pay on every tick. The
Delta protocol makes the question cheap: ``_delta_log/_last_checkpoint`` names the newest checkpoint, and the
commits after it are the ``NNNNNNNNNNNNNNNNNNNN.json`` files that sort after it. On S3 and GCS that is one GET
and one listing that starts at the checkpoint's key (``StartAfter``, ``startOffset``), whatever the number of
versions; elsewhere (Azure, a local disk) the listing covers the log folder. The log's files are read with
fsspec, from the same storage options delta-rs takes (``AWS_ENDPOINT_URL``, the keys, ``AWS_REGION``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from mds_core.errors import DeltaTableError, DeltaTableNotFoundError

LOG = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
_COMMIT_DIGITS = 20


def commit_name(version: int) -> str:
    """The file name of commit ``version`` in ``_delta_log/``.

    Args:
        version: a table version.
    """
    return f"{version:0{_COMMIT_DIGITS}}.json"


def log_filesystem(table_uri: str | os.PathLike[str], storage_options: dict[str, str] | None) -> tuple[Any, str]:
    """An fsspec filesystem for the table's log and the log folder's path on it.

    Args:
        table_uri: the table's root (a local path, ``file://``, ``s3://`` or another fsspec URL).
        storage_options: delta-rs's options; for ``s3://`` the endpoint, keys and region are taken from them.
    """
    import fsspec

    uri = os.fspath(table_uri).rstrip("/")
    if uri.startswith("s3://"):
        return _s3_filesystem(storage_options or {}), f"{uri.removeprefix('s3://')}/{LOG}"
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, f"{path}/{LOG}"


def _s3_filesystem(options: dict[str, str]) -> Any:
    """s3fs configured from delta-rs's option names (absent ones come from the environment, as for delta-rs)."""
    import s3fs

    upper = {key.upper(): value for key, value in options.items()}
    client: dict[str, str] = {}
    if endpoint := upper.get("AWS_ENDPOINT_URL") or upper.get("AWS_ENDPOINT"):
        client["endpoint_url"] = endpoint
    if region := upper.get("AWS_REGION") or upper.get("AWS_DEFAULT_REGION"):
        client["region_name"] = region
    return s3fs.S3FileSystem(
        key=upper.get("AWS_ACCESS_KEY_ID"),
        secret=upper.get("AWS_SECRET_ACCESS_KEY"),
        token=upper.get("AWS_SESSION_TOKEN"),
        client_kwargs=client,
        skip_instance_cache=True,
    )


def latest_delta_version(table_uri: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> int:
    """The table's latest version, from the last checkpoint and the commits after it only.

    Costs one read of ``_last_checkpoint`` and one listing of the keys after the checkpoint (on S3 a
    ``start-after`` listing: a page per thousand commits since the checkpoint, whatever the log's length).

    Args:
        table_uri: the table's root (a local path or a URL).
        storage_options: delta-rs's object store options; None takes them from the environment.

    Raises:
        DeltaTableNotFoundError: the location holds no Delta log.
    """
    fs, log = log_filesystem(table_uri, storage_options)
    checkpoint = _last_checkpoint(fs, log)
    after = commit_name(checkpoint)[: -len(".json")] if checkpoint is not None else None
    versions = [int(name[:_COMMIT_DIGITS]) for name in _names_after(fs, log, after) if _is_commit(name)]
    newest = max(versions, default=checkpoint)
    if newest is None:
        raise DeltaTableNotFoundError(f"no Delta table at {os.fspath(table_uri)}: {LOG}/ holds no commit")
    return newest


def _last_checkpoint(fs: Any, log: str) -> int | None:
    """The version ``_last_checkpoint`` names, or None when the table has no checkpoint."""
    try:
        text = fs.cat_file(f"{log}/{LAST_CHECKPOINT}")
    except FileNotFoundError:
        return None
    return int(json.loads(text)["version"])


def _is_commit(name: str) -> bool:
    return len(name) == _COMMIT_DIGITS + 5 and name.endswith(".json") and name[:_COMMIT_DIGITS].isdigit()


def _names_after(fs: Any, log: str, after: str | None) -> list[str]:
    """The names in ``log`` that sort after ``after`` (all when None): on S3 listed from there, not from the start."""
    if hasattr(fs, "call_s3"):
        return _s3_names_after(fs, log, after)
    if {"gs", "gcs"} & set(_protocols(fs)):
        return _gcs_names_after(fs, log, after)
    try:
        names = [os.path.basename(str(entry).rstrip("/")) for entry in fs.ls(log, detail=False)]
    except FileNotFoundError:
        return []
    return sorted(name for name in names if after is None or name > after)


def _s3_names_after(fs: Any, log: str, after: str | None) -> list[str]:
    """One ``ListObjectsV2`` page per thousand keys, starting after ``log/after``."""
    bucket, _, prefix = log.partition("/")
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{prefix}/"}
    if after is not None:
        request["StartAfter"] = f"{prefix}/{after}"
    names: list[str] = []
    while True:
        page = fs.call_s3("list_objects_v2", **request)
        names += [item["Key"].rsplit("/", 1)[-1] for item in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return names
        request["ContinuationToken"] = page["NextContinuationToken"]


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = getattr(fs, "protocol", ())
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _gcs_names_after(fs: Any, log: str, after: str | None) -> list[str]:
    """One objects.list page per thousand keys, from ``log/after`` on (GCS's ``startOffset`` is inclusive)."""
    bucket, _, prefix = log.partition("/")
    request: dict[str, Any] = {"prefix": f"{prefix}/"}
    if after is not None:
        request["startOffset"] = f"{prefix}/{after}"
    names: list[str] = []
    while True:
        page = fs.call("GET", "b/{}/o", bucket, json_out=True, **request)
        names += [item["name"].rsplit("/", 1)[-1] for item in page.get("items", [])]
        if not page.get("nextPageToken"):
            return [name for name in names if after is None or name > after]
        request["pageToken"] = page["nextPageToken"]


def read_commit(fs: Any, log: str, version: int, table_uri: str) -> list[dict[str, Any]]:
    """The actions of commit ``version`` (one JSON object a line), in the log's order.

    Args:
        fs: the log's filesystem, from ``log_filesystem``.
        log: the log folder's path on it.
        version: the commit to read.
        table_uri: the table, for the message.

    Raises:
        DeltaTableError: the commit is not in the log (cleaned up by log retention, or never written).
    """
    try:
        text = fs.cat_file(f"{log}/{commit_name(version)}")
    except FileNotFoundError as err:
        raise DeltaTableError(
            f"{table_uri} has no commit file for version {version} (removed by log retention, or not written yet)"
        ) from err
    return [json.loads(line) for line in text.decode().splitlines() if line.strip()]
