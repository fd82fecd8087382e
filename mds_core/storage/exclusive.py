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
}


class ExclusiveCreateUnsupported(ConfigurationError):
    """A store that cannot create a file exclusively, so concurrent commits could both succeed."""


def supports_exclusive_create(scheme: str) -> bool:
    return scheme in EXCLUSIVE_CREATE


def create_if_absent(fs: Any, scheme: str, path: str, data: bytes, url: str) -> bool:
    """Create ``path`` holding ``data``; False if it already existed. One attempt, no retries.

    Raises ``ExclusiveCreateUnsupported`` for a store that cannot make the create exclusive.
    """
    if scheme == "file":
        return create_exclusive(path, data)
    if scheme in ("s3", "s3a"):
        return _create_on_s3(fs, path, data)
    raise ExclusiveCreateUnsupported(
        f"{url}: {scheme}:// cannot create a file exclusively, so two writers committing at once could "
        f"both succeed. Commit versions on a store that can ({', '.join(sorted(EXCLUSIVE_CREATE))})."
    )


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
