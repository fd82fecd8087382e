"""Check verdicts kept beside a version: ``_versions/checks/<version>/<check>.json``.

A check that gates publication (the pipelines' loader smoke test) records what it found with the
version it tested, so whoever publishes reads the verdict from the shard set itself, with no need to
ask the orchestrator's event log. A verdict is a small JSON object; ``vacuum`` keeps the verdicts of
the versions it keeps and removes the others with their versions.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mds_core.errors import ConfigurationError, InvalidManifestError
from mds_core.storage.remote import RemoteStore
from mds_core.versions.head import read_if_present
from mds_core.versions.manifest import VERSIONS, is_version_number

CHECKS = f"{VERSIONS}/checks"
_CHECK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def verdict_name(version: int, check: str) -> str:
    """The verdict's path under the root; ``check`` must be a plain name (it becomes a file name)."""
    if not _CHECK_NAME.fullmatch(check) or check.strip(".") == "":
        raise ConfigurationError(f"check name {check!r} must be 1-128 letters, digits, '_', '.' or '-'")
    return f"{CHECKS}/{version}/{check}.json"


def write_verdict(store: RemoteStore, version: int, check: str, verdict: dict[str, Any]) -> None:
    """Record ``verdict`` (replacing an earlier one) for ``version``; it must be a JSON object."""
    store.write_bytes(verdict_name(version, check), json.dumps(verdict, sort_keys=True).encode())


def read_verdict(store: RemoteStore, version: int, check: str) -> dict[str, Any] | None:
    """The verdict ``check`` recorded for ``version``, or None when it recorded none."""
    name = verdict_name(version, check)
    data = read_if_present(store, name)
    if data is None:
        return None
    try:
        verdict = json.loads(data)
    except (ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
        raise InvalidManifestError(f"{store.url_of(name)}: the verdict is not JSON ({err})") from None
    if not isinstance(verdict, dict):
        raise InvalidManifestError(f"{store.url_of(name)}: the verdict is a {type(verdict).__name__}, not an object")
    return verdict


def verdict_of_kept(name: str, kept: set[int]) -> bool:
    """Whether ``name`` is a verdict of one of the ``kept`` versions (vacuum leaves those alone)."""
    parts = name.split("/")
    return name.startswith(f"{CHECKS}/") and len(parts) == 4 and is_version_number(parts[2]) and int(parts[2]) in kept
