"""Create a file only if it does not exist yet, on every store that can promise it.

A shard-set commit is safe with concurrent writers only if creating its manifest is exclusive:
of two writers creating the same name, exactly one succeeds and the other learns it lost. Each
store gets that promise differently, and some cannot give it at all; those are refused rather
than allowed to let two commits both "win".
"""

from __future__ import annotations

from typing import Any

from mds_core.errors import ConfigurationError
from mds_core.storage.files import create_exclusive

# scheme -> how the store makes a create exclusive (docs/remote-storage.md has the table).
EXCLUSIVE_CREATE: dict[str, str] = {
    "file": "hard link of a complete temporary file (O_CREAT|O_EXCL where links are refused)",
    "s3": "conditional PUT, If-None-Match: *",
    "s3a": "conditional PUT, If-None-Match: *",
    "gs": "upload with the precondition ifGenerationMatch=0 (412 if the object exists)",
    "gcs": "upload with the precondition ifGenerationMatch=0 (412 if the object exists)",
    "az": "Put Blob with If-None-Match: * (409 BlobAlreadyExists if the blob exists)",
    "abfs": "Put Blob with If-None-Match: * (409 BlobAlreadyExists if the blob exists)",
    "abfss": "Put Blob with If-None-Match: * (409 BlobAlreadyExists if the blob exists)",
    "dbfs": "Files API upload with overwrite=false (409 if the file exists)",
}


class ExclusiveCreateUnsupported(ConfigurationError):
    """A store that cannot create a file exclusively, so concurrent commits could both succeed."""


def supports_exclusive_create(scheme: str) -> bool:
    return scheme in EXCLUSIVE_CREATE


def require_exclusive_create(scheme: str, url: str) -> None:
    """Refuse, before anything is written, a store on which concurrent commits could both succeed."""
    if not supports_exclusive_create(scheme):
        raise ExclusiveCreateUnsupported(
            f"{url}: {scheme}:// cannot create a file exclusively, so two writers committing at once could "
            f"both succeed. Keep versioned shard sets on a store that can "
            f"({', '.join(s + '://' for s in sorted(EXCLUSIVE_CREATE) if s != 'file')} or a local path)."
        )


def create_if_absent(fs: Any, scheme: str, path: str, data: bytes, url: str) -> bool:
    """Create ``path`` holding ``data``; False if it already existed. One attempt, no retries.

    Raises ``ExclusiveCreateUnsupported`` for a store that cannot make the create exclusive.
    """
    if scheme == "file":
        return create_exclusive(path, data)
    if scheme in ("s3", "s3a"):
        return _create_on_s3(fs, path, data)
    if scheme in ("gs", "gcs", "az", "abfs", "abfss", "dbfs"):
        return _create_with_precondition(fs, path, data)
    require_exclusive_create(scheme, url)
    raise AssertionError(f"{scheme} is in EXCLUSIVE_CREATE but has no branch here")


def _create_on_s3(fs: Any, path: str, data: bytes) -> bool:
    try:
        fs.pipe_file(path, data, mode="create")
        return True
    except FileExistsError:
        return False
    except OSError as err:
        if "PreconditionFailed" in str(err) or "412" in str(err):
            return False
        raise


def _create_with_precondition(fs: Any, path: str, data: bytes) -> bool:
    """gcsfs sends ``ifGenerationMatch=0``, adlfs ``overwrite=False`` (If-None-Match: *) and
    ``VolumesFileSystem`` a Files API upload with ``overwrite=false`` for ``mode="create"``; each turns
    the store's refusal (412, 409 BlobAlreadyExists, 409 Conflict) into FileExistsError."""
    try:
        fs.pipe_file(path, data, mode="create")
        return True
    except FileExistsError:
        return False
