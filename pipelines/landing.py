"""The landing zone: ``<root>/<YYYY-MM-DD>/*.parquet|csv|json`` on a local disk or any fsspec URL.

The zone is opened through ``mds_core.storage`` like the shard store: a store of its registry gets its
set-up (``S3_ENDPOINT_URL``, one-attempt clients, no listing cache), and any other fsspec URL its fallback.

``landed_days`` answers "which days have files, and did they change?" with one listing of the whole
zone (a recursive ``find``: on object stores a few paged LIST requests, not one request per file),
so a sensor that asks every minute stays cheap for years of day folders.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from mds_core.errors import MDSError, StorageError
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.urls import join, redact

T = TypeVar("T")

LANDING_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
DAY_FOLDER = re.compile(r"\d{4}-\d{2}-\d{2}")
# What identifies one version of a file, as each fsspec backend's info() spells it: an object
# store's ETag changes with the bytes, LastModified/mtime with every rewrite (even of equal bytes).
# (Not a local file's ctime: a chmod or a backup tool's touch would look like new data.)
_VERSION_KEYS = (
    "ETag",
    "etag",
    "md5Hash",
    "md5",
    "crc32c",
    "generation",
    "version_id",
    "VersionId",
    "LastModified",
    "last_modified",
    "mtime",
    "updated",
    "modified",
)
# Seconds for one listing; the sensor asks again at its next tick, so one attempt is enough.
LIST_TIMEOUT = 60.0


def landed_days(url: str, storage_options: dict[str, Any] | None = None) -> dict[str, tuple[str, str]]:
    """Day folders with files in a known format: ``{day: (format or "mixed", signature of the files)}``.

    Only ``<url>/<YYYY-MM-DD>/<file>`` counts; names starting with ``.`` or ``_`` (Spark's and the
    uploaders' bookkeeping) are skipped, as Spark skips them when it reads the day. The signature
    changes when a file is added, removed or rewritten. A root that does not exist has no days;
    a store that cannot be listed raises ``StorageError`` naming ``url``.
    """
    by_day: dict[str, list[tuple[str, str, str]]] = {}
    for rel, info in _listing(url, storage_options).items():
        parts = rel.split("/")
        if len(parts) != 2 or not DAY_FOLDER.fullmatch(parts[0]) or parts[1].startswith((".", "_")):
            continue
        fmt = LANDING_FORMATS.get(posixpath.splitext(parts[1])[1].lower())
        if fmt is not None:
            by_day.setdefault(parts[0], []).append((parts[1], fmt, _file_version(info)))
    return {day: _summary(files) for day, files in sorted(by_day.items())}


def day_url(url: str, day: str) -> str:
    """The folder (or prefix) of one landed day: what the raw asset reads for that partition."""
    return join(url, day)


def _summary(files: list[tuple[str, str, str]]) -> tuple[str, str]:
    formats = {fmt for _, fmt, _ in files}
    entries = sorted((name, version) for name, _, version in files)
    signature = hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]
    return (formats.pop() if len(formats) == 1 else "mixed", signature)


def _file_version(info: dict[str, Any]) -> str:
    """Size plus whatever this backend reports that changes when the file is rewritten."""
    size = info.get("size", info.get("Size"))
    stamps = [f"{key}={_stamp(info[key])}" for key in _VERSION_KEYS if info.get(key) is not None]
    return ";".join([f"size={size}", *stamps])


def _stamp(value: Any) -> Any:
    # A datetime prints in the process's local zone; the signature must not change with TZ or a deploy.
    return value.timestamp() if isinstance(value, datetime) else value


def _listing(url: str, storage_options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every file under ``url`` with its ``info()``, keyed by the path relative to ``url``."""
    store = _guarded(url, lambda: _open(url, storage_options))
    fs, root = store.fs, store.path.rstrip("/")
    try:
        found = _guarded(url, lambda: fs.find(root, detail=True))
    except FileNotFoundError:  # nothing has landed yet (or the folder was removed): no days
        found = {}
    if not found and store.kind.bucket is not None:  # adlfs lists a missing container as empty
        _require_bucket(fs, root, url, store.kind.bucket)
    prefix = f"{root}/"
    return {
        path[len(prefix) :]: info
        for path, info in found.items()
        if path.startswith(prefix) and info.get("type", "file") == "file"
    }


def _require_bucket(fs: Any, root: str, url: str, what: str) -> None:
    """A misspelt bucket (or container) must not read as "nothing landed yet" for ever.

    Only a missing folder means that.
    """
    bucket = root.split("/", 1)[0]
    try:
        _guarded(url, lambda: fs.info(bucket))
    except FileNotFoundError:
        raise StorageError(
            f"landing zone {redact(url)}: the {what} {bucket!r} does not exist (or these credentials "
            "cannot see it); check the URL"
        ) from None


def _guarded(url: str, call: Callable[[], T]) -> T:
    """``call()``, its failures (other than a missing path) turned into one error that names the zone."""
    try:
        return call()
    except (FileNotFoundError, MDSError):
        raise
    except Exception as err:  # network and auth errors come in many library-specific types
        shown = redact(url)
        problem = str(err).replace(url, shown)  # a library may quote the URL it was given
        raise StorageError(
            f"landing zone {shown}: cannot list it ({type(err).__name__}: {problem}); check the URL, "
            "the endpoint and the credentials (storage options or environment)"
        ) from err


def _open(url: str, options: dict[str, Any] | None) -> RemoteStore:
    """The zone as a store: the registry's set-up for its scheme, fsspec's own filesystem for others."""
    return open_store(url, retry=1, timeout=LIST_TIMEOUT, storage_options=options, any_fsspec=True)
