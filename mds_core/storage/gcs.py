"""Set-up for Google Cloud Storage (gcsfs): ``gs://`` and ``gcs://``.

As for S3, the client makes one attempt per call: ``RemoteStore`` counts the attempts itself, and a
conditional create retried inside the client after a lost reply would find its own object and report a
lost race. An emulator is reached as gcsfs's own tools reach it, through ``STORAGE_EMULATOR_HOST`` (or
the ``endpoint_url`` option), so subprocesses find it too; with an emulator and no ``token`` option,
requests are anonymous. gcsfs's JSON-API filesystem is used, not its experimental gRPC one (zonal
buckets), which emulators do not serve.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# gcsfs methods wrapped in its own retry loop (six attempts with backoff of up to 32 s)
_GCSFS_RETRYING = ("_request", "_get_file_request", "_get_file_concurrent")


def filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """(a one-attempt GCSFileSystem, ``bucket/path``) for a ``gs://`` or ``gcs://`` URL."""
    options = dict(options)
    if options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST"):
        options.setdefault("token", "anon")
    fs = _one_attempt_gcs()(skip_instance_cache=True, **options)
    return fs, fs._strip_protocol(url)


def get_file(fs: Any) -> Any:
    """The download of one object as one GET (``alt=media``) straight into the local file.

    gcsfs's ``_get_file`` (since 2025) first reads the object's metadata to plan a concurrent,
    ranged download: a metadata GET and a listing (is it a directory?) before each file's GET, three
    requests where one does. Its ``_get_file_request`` is that one GET; older gcsfs's ``_get_file``
    is nothing more, and is used where ``_get_file_request`` is missing.
    """
    return getattr(fs, "_get_file_request", None) or fs._get_file


@functools.cache
def _one_attempt_gcs() -> type:
    from gcsfs.core import GCSFileSystem

    unwrapped = {
        name: getattr(GCSFileSystem, name).__wrapped__
        for name in _GCSFS_RETRYING
        if hasattr(getattr(GCSFileSystem, name, None), "__wrapped__")
    }
    return type("OneAttemptGCSFileSystem", (GCSFileSystem,), unwrapped)
