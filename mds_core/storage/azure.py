"""Set-up for Azure Blob Storage and ADLS (adlfs): ``az://``, ``abfs://`` and ``abfss://``.

As for S3, the client makes one attempt per call (``RemoteStore`` counts the attempts itself). The
account comes from ``AZURE_STORAGE_CONNECTION_STRING`` (adlfs reads it, and the other
``AZURE_STORAGE_*`` variables), so subprocesses find it too, or from the ``connection_string`` and
``account_name`` options.
"""

from __future__ import annotations

from typing import Any


def filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """(a one-attempt AzureBlobFileSystem, ``container/path``) for an ``az://``, ``abfs://`` or ``abfss://`` URL."""
    from adlfs import AzureBlobFileSystem

    options = {**AzureBlobFileSystem._get_kwargs_from_urls(url), **options}
    if timeout is not None:
        options.setdefault("connection_timeout", min(timeout, 30))
        options.setdefault("read_timeout", timeout)
    fs = AzureBlobFileSystem(skip_instance_cache=True, **options)
    _no_client_retries(fs.service_client)
    return fs, fs._strip_protocol(url)


def _no_client_retries(service_client: Any) -> None:
    """The Azure SDK retries 3 times from a 15 s backoff; its policy object is shared by every blob client."""
    policy = getattr(getattr(service_client, "_config", None), "retry_policy", None)
    if policy is not None and hasattr(policy, "total_retries"):
        policy.total_retries = 0
