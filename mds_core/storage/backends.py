"""Set-up for Google Cloud Storage (gcsfs) and Azure Blob Storage (adlfs) stores.

As for S3, the client makes one attempt per call: ``RemoteStore`` counts the attempts itself, and a
conditional create retried inside the client after a lost reply would find its own object and report
a lost race. Emulators are reached the way the clients' own tools reach them, through the
environment, so that subprocesses (ranks, DataLoader workers) find them too:

* ``gs://`` and ``gcs://``: ``STORAGE_EMULATOR_HOST`` (or the ``endpoint_url`` option); with an
  emulator and no ``token`` option, requests are anonymous. gcsfs's JSON-API filesystem is used, not
  its experimental gRPC one (zonal buckets), which emulators do not serve.
* ``az://``, ``abfs://`` and ``abfss://``: ``AZURE_STORAGE_CONNECTION_STRING`` (adlfs reads it, and
  the other ``AZURE_STORAGE_*`` variables) or the ``connection_string``/``account_name`` options.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# gcsfs methods wrapped in its own retry loop (six attempts with backoff of up to 32 s)
_GCSFS_RETRYING = ("_request", "_get_file_request", "_get_file_concurrent")


def gcs(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    options = dict(options)
    if options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST"):
        options.setdefault("token", "anon")
    fs = _one_attempt_gcs()(skip_instance_cache=True, **options)
    return fs, fs._strip_protocol(url)


def azure(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    from adlfs import AzureBlobFileSystem

    options = {**AzureBlobFileSystem._get_kwargs_from_urls(url), **options}
    if timeout is not None:
        options.setdefault("connection_timeout", min(timeout, 30))
        options.setdefault("read_timeout", timeout)
    fs = AzureBlobFileSystem(skip_instance_cache=True, **options)
    _no_client_retries(fs.service_client)
    return fs, fs._strip_protocol(url)


@functools.cache
def _one_attempt_gcs() -> type:
    from gcsfs.core import GCSFileSystem

    unwrapped = {
        name: getattr(GCSFileSystem, name).__wrapped__
        for name in _GCSFS_RETRYING
        if hasattr(getattr(GCSFileSystem, name, None), "__wrapped__")
    }
    return type("OneAttemptGCSFileSystem", (GCSFileSystem,), unwrapped)


def _no_client_retries(service_client: Any) -> None:
    """The Azure SDK retries 3 times from a 15 s backoff; its policy object is shared by every blob client."""
    policy = getattr(getattr(service_client, "_config", None), "retry_policy", None)
    if policy is not None and hasattr(policy, "total_retries"):
        policy.total_retries = 0
