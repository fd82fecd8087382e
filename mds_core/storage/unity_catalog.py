"""Unity Catalog table names (``catalog.schema.table``) resolved to a storage location and credentials for delta-rs.

Two documented Unity Catalog REST calls, through the official SDK's ``WorkspaceClient`` (configured as for volumes:
``DATABRICKS_HOST`` with ``DATABRICKS_TOKEN``, a profile, a service principal, or the ``workspace`` options):

* ``GET /api/2.1/unity-catalog/tables/{full_name}`` (``tables.get``): the table's ``storage_location``,
  ``table_id`` and ``data_source_format``. A table that is not Delta (a view, Parquet, Iceberg...) is refused.
* ``POST /api/2.0/unity-catalog/temporary-table-credentials`` (``temporary_table_credentials``, "credential
  vending"): short-lived, read-only credentials for that location. AWS (and R2) keys with their session token
  become delta-rs's ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``; an Azure user
  delegation SAS ``azure_storage_sas_token``; an Azure AD token ``azure_storage_token``. delta-rs's object store
  takes no OAuth token for Google Cloud Storage, so a vended GCP token is not used: the caller's own options are.
  A workspace that does not vend (the metastore's external access is off: 404, or 403 "not enabled") leaves the
  caller's storage options as they are, and a log line says so.

A Delta table kept in a volume, ``dbfs:/Volumes/<catalog>/<schema>/<volume>/<folder>``, is found the same way
(``resolve_volume_path``): ``GET /api/2.1/unity-catalog/volumes/{full_name}`` for the volume's storage location,
``POST /api/2.0/unity-catalog/temporary-volume-credentials`` for read credentials.

Every refusal is an ``MDSError`` that names the table and what to fix: ``UnityCatalogError`` for a bad name or a
table that is not Delta, ``UnityCatalogTableNotFoundError`` (404), ``UnityCatalogPermissionError`` (401, 403) and
``UnityCatalogCredentialsExpiredError`` (credentials vended already expired, or the store answering
``ExpiredToken`` while the table is read: see ``expired_credentials_named``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mds_core.errors import (
    UnityCatalogCredentialsExpiredError,
    UnityCatalogError,
    UnityCatalogPermissionError,
    UnityCatalogTableNotFoundError,
    chain_of,
)
from mds_core.storage.volumes_client import _message, _status, workspace_client

_log = logging.getLogger(__name__)

UC_SCHEME = "uc://"
VOLUME_PREFIX = "dbfs:/Volumes/"
# A Unity Catalog name part holds no period, space, slash or control character (Databricks' naming rules).
_PART = r"[^.\s/\\:`]+"
_TABLE_NAME = re.compile(rf"{_PART}\.{_PART}\.{_PART}")
_PART_NAME = re.compile(_PART)
# How a workspace without credential vending words its 403 (the metastore's external_access_enabled is off).
_NOT_OFFERED = re.compile(r"not\s+(been\s+)?enabled|external\s+(data\s+)?access", re.IGNORECASE)


@dataclass(frozen=True)
class ResolvedTable:
    """Where a Unity Catalog table's data lives, and the delta-rs options to read it.

    Attributes:
        name: the table's full name, ``catalog.schema.table``.
        table_id: Unity Catalog's id of the table.
        storage_location: the table's root (``s3://...``, ``abfss://...``, ``gs://...``).
        storage_options: delta-rs's object store options: the caller's, with the vended credentials over them.
        expires_at: when the vended credentials expire; None when none were vended.
    """

    name: str
    table_id: str
    storage_location: str
    storage_options: dict[str, str]
    expires_at: datetime | None

    @property
    def uc_name(self) -> str | None:
        """The table's ``catalog.schema.table``; None for a folder in a volume (``name`` is then its path)."""
        return None if is_volume_path(self.name) else self.name


def is_table_name(table_uri: str | os.PathLike[str]) -> bool:
    """Whether ``table_uri`` names a Unity Catalog table rather than a path or a URL.

    The rule: ``uc://`` followed by anything (checked later), or a string of three dot-separated parts with no
    slash, backslash or colon (``main.sales.orders``). A local directory so named is read as ``./main.sales.orders``.

    Args:
        table_uri: what the caller passed as the table.
    """
    if not isinstance(table_uri, str):
        return False
    return table_uri.startswith(UC_SCHEME) or _TABLE_NAME.fullmatch(table_uri) is not None


def table_name(table_uri: str) -> str:
    """The ``catalog.schema.table`` in ``table_uri`` (with or without ``uc://``), or a ``UnityCatalogError``.

    Args:
        table_uri: a Unity Catalog table name.
    """
    name = table_uri.removeprefix(UC_SCHEME)
    if not _TABLE_NAME.fullmatch(name):
        raise UnityCatalogError(
            f"{table_uri!r} is not a Unity Catalog table name: write three dot-separated names, "
            "catalog.schema.table (e.g. main.sales.orders), each without periods, spaces, slashes or colons"
        )
    return name


def resolve_table(
    name: str,
    *,
    storage_options: dict[str, str] | None = None,
    workspace: dict[str, Any] | None = None,
    timeout: float | None = 60.0,
) -> ResolvedTable:
    """The storage location of the Unity Catalog table ``name``, with vended read credentials where offered.

    Args:
        name: ``catalog.schema.table``, or ``uc://catalog.schema.table``.
        storage_options: the caller's delta-rs options (``AWS_REGION``, an endpoint...); vended credentials
            replace any credential of the same name in them.
        workspace: Databricks SDK ``Config`` fields (``host``, ``token``, ``profile``...); None takes the SDK's
            default chain (``DATABRICKS_HOST`` with ``DATABRICKS_TOKEN``, ``~/.databrickscfg``...).
        timeout: seconds to wait for each answer of the workspace.

    Raises:
        UnityCatalogError: a bad name, or a table that is not a Delta table with a storage location.
        UnityCatalogTableNotFoundError: no such table, schema or catalog (or none the caller may see).
        UnityCatalogPermissionError: the workspace refused the credentials (401) or a privilege is missing (403).
        UnityCatalogCredentialsExpiredError: the vended credentials had expired when they arrived.
    """
    from databricks.sdk.service.catalog import TableOperation

    full_name = table_name(name)
    client = workspace_client(f"{UC_SCHEME}{full_name}", timeout, dict(workspace or {}))
    host = client.config.host
    info = _call(full_name, host, "tables.get", lambda: client.tables.get(full_name))
    table_id, location = _delta_location(full_name, info)
    vending = client.temporary_table_credentials
    vended = _vend(
        full_name,
        host,
        "temporary-table-credentials",
        lambda: vending.generate_temporary_table_credentials(operation=TableOperation.READ, table_id=table_id),
    )
    return _resolved(full_name, table_id, location, storage_options, vended)


def resolve_location(
    table_uri: str, *, storage_options: dict[str, str] | None = None, workspace: dict[str, Any] | None = None
) -> ResolvedTable:
    """``resolve_table`` for a table name, ``resolve_volume_path`` for a path in a volume.

    Args:
        table_uri: ``catalog.schema.table`` (or ``uc://...``), or ``dbfs:/Volumes/...``.
        storage_options: the caller's delta-rs options.
        workspace: Databricks SDK ``Config`` fields.
    """
    resolve = resolve_volume_path if is_volume_path(table_uri) else resolve_table
    return resolve(table_uri, storage_options=storage_options, workspace=workspace)


def in_unity_catalog(table_uri: str | os.PathLike[str]) -> bool:
    """Whether ``table_uri`` is resolved through Unity Catalog: a table name or a path in a volume.

    Args:
        table_uri: what the caller passed as the table.
    """
    return is_table_name(table_uri) or is_volume_path(table_uri)


def is_volume_path(table_uri: str | os.PathLike[str]) -> bool:
    """Whether ``table_uri`` is a path in a Unity Catalog volume, ``dbfs:/Volumes/<catalog>/<schema>/<volume>/...``.

    Args:
        table_uri: what the caller passed as the table.
    """
    return isinstance(table_uri, str) and table_uri.startswith(VOLUME_PREFIX)


def resolve_volume_path(
    path: str,
    *,
    storage_options: dict[str, str] | None = None,
    workspace: dict[str, Any] | None = None,
    timeout: float | None = 60.0,
) -> ResolvedTable:
    """The cloud location of a folder in a Unity Catalog volume (a Delta table kept there), with vended credentials.

    ``GET /api/2.1/unity-catalog/volumes/{full_name}`` gives the volume's ``storage_location``; the path below
    the volume is joined to it; ``POST /api/2.0/unity-catalog/temporary-volume-credentials`` vends read
    credentials for it, mapped as for a table (``resolve_table``). On Databricks compute the same folder is also a
    local path, ``/Volumes/...`` (the volumes' FUSE mount), which needs no resolving.

    Args:
        path: ``dbfs:/Volumes/<catalog>/<schema>/<volume>/<folder>``.
        storage_options: the caller's delta-rs options; vended credentials replace those of the same name.
        workspace: Databricks SDK ``Config`` fields; None takes the SDK's default chain.
        timeout: seconds to wait for each answer of the workspace.

    Raises:
        UnityCatalogError: not a path inside a volume, or a volume without a storage location.
        UnityCatalogTableNotFoundError: no such volume (or none the caller may see).
        UnityCatalogPermissionError: the credentials were refused (401) or a privilege is missing (403).
        UnityCatalogCredentialsExpiredError: the vended credentials had expired when they arrived.
    """
    from databricks.sdk.service.catalog import VolumeOperation

    volume, below = _volume_parts(path)
    client = workspace_client(path, timeout, dict(workspace or {}))
    host = client.config.host
    info = _call(volume, host, "volumes.read", lambda: client.volumes.read(volume))
    if not info.storage_location or not info.volume_id:
        raise UnityCatalogError(f"Unity Catalog gives no storage location for the volume {volume}: nothing to read")
    location = "/".join(part for part in (str(info.storage_location).rstrip("/"), below) if part)
    vending = client.temporary_volume_credentials
    vended = _vend(
        volume,
        host,
        "temporary-volume-credentials",
        lambda: vending.generate_temporary_volume_credentials(
            operation=VolumeOperation.READ_VOLUME, volume_id=info.volume_id
        ),
    )
    return _resolved(path, str(info.volume_id), location, storage_options, vended)


def _volume_parts(path: str) -> tuple[str, str]:
    """(``catalog.schema.volume``, the path below the volume) of a ``dbfs:/Volumes/...`` path."""
    parts = path.removeprefix(VOLUME_PREFIX).strip("/").split("/")
    if len(parts) < 3 or not all(_PART_NAME.fullmatch(part) for part in parts[:3]):
        raise UnityCatalogError(
            f"{path!r} is not a path in a Unity Catalog volume: write {VOLUME_PREFIX}<catalog>/<schema>/<volume>/<folder>"
        )
    if any(part in ("", ".", "..") for part in parts[3:]):  # the folder must stay inside the volume's location
        raise UnityCatalogError(f"{path!r}: a path in a volume has no empty, '.' or '..' segments")
    return ".".join(parts[:3]), "/".join(parts[3:])


def _resolved(
    name: str,
    object_id: str,
    location: str,
    storage_options: dict[str, str] | None,
    vended: tuple[dict[str, str], datetime] | None,
) -> ResolvedTable:
    """The ``ResolvedTable``: the caller's options, with the vended credentials (if any) over them."""
    options = dict(storage_options or {})
    if vended is None:
        _log.info("%s: %s; reading %s with the caller's storage options", name, _NO_VENDING, location)
        return ResolvedTable(name, object_id, location, options, None)
    credentials, expires_at = vended
    replaced = {key.lower() for key in credentials}
    options = {key: value for key, value in options.items() if key.lower() not in replaced} | credentials
    _log.info("%s: %s with credentials vended until %s", name, location, expires_at)
    return ResolvedTable(name, object_id, location, options, expires_at)


_NO_VENDING = "the workspace vends no usable storage credentials for it"


def _delta_location(name: str, info: Any) -> tuple[str, str]:
    """(table id, storage location) of a Delta table's ``TableInfo``; any other kind of table is refused."""
    fmt = info.data_source_format.value if info.data_source_format is not None else None
    kind = info.table_type.value if info.table_type is not None else "table"
    if fmt != "DELTA":
        raise UnityCatalogError(
            f"Unity Catalog table {name} is a {kind} in format {fmt or 'none'}, not a Delta table: "
            "delta_to_mds reads Delta tables only (convert other tables through Spark: dataframe_to_mds)"
        )
    if not info.storage_location or not info.table_id:
        raise UnityCatalogError(f"Unity Catalog gives no storage location for the {kind} {name}: nothing to read")
    return str(info.table_id), str(info.storage_location)


def _vend(name: str, host: str, request: str, call: Any) -> tuple[dict[str, str], datetime] | None:
    """Read credentials (``call()``, the vending request) as delta-rs options, with their expiry; None where unusable."""
    from databricks.sdk.errors import NotFound, PermissionDenied

    try:
        answer = _call(name, host, request, call)
    except UnityCatalogError as err:
        cause = err.__cause__
        offered = not isinstance(cause, NotFound) and not (
            isinstance(cause, PermissionDenied) and _NOT_OFFERED.search(str(cause))
        )
        if offered:
            raise
        said = _message(cause) if isinstance(cause, Exception) else cause
        _log.info("%s: credential vending is not enabled in the workspace (%s)", name, said)
        return None
    expires_at = datetime.fromtimestamp((answer.expiration_time or 0) / 1000, UTC)
    if expires_at <= datetime.now(UTC):
        raise UnityCatalogCredentialsExpiredError(
            f"the storage credentials {host} vended for {name} expired at {expires_at.isoformat()}, before they "
            "arrived: check this machine's clock, then read again (each read asks for fresh credentials)"
        )
    options = vended_options(answer)
    if options is None:
        _log.warning("%s: delta-rs cannot use the credentials vended (a GCP OAuth token or none)", name)
        return None
    return options, expires_at


def vended_options(answer: Any) -> dict[str, str] | None:
    """delta-rs's object store options for a ``GenerateTemporaryTableCredentialResponse``; None where it has none.

    Args:
        answer: the SDK's answer to ``generate_temporary_table_credentials`` (or ``..._volume_credentials``).
    """
    for aws in (answer.aws_temp_credentials, answer.r2_temp_credentials):
        if aws is not None and aws.access_key_id and aws.secret_access_key:
            options = {"AWS_ACCESS_KEY_ID": aws.access_key_id, "AWS_SECRET_ACCESS_KEY": aws.secret_access_key}
            return options | ({"AWS_SESSION_TOKEN": aws.session_token} if aws.session_token else {})
    if answer.azure_user_delegation_sas is not None and answer.azure_user_delegation_sas.sas_token:
        return {"azure_storage_sas_token": answer.azure_user_delegation_sas.sas_token}
    if answer.azure_aad is not None and answer.azure_aad.aad_token:
        return {"azure_storage_token": answer.azure_aad.aad_token}
    return None  # gcp_oauth_token: object_store's GCS client takes a service account, not a bearer token


def _call(name: str, host: str, request: str, call: Any) -> Any:
    """``call()``, its SDK errors made ``UnityCatalogError`` subclasses naming the table and the fix."""
    from databricks.sdk.errors import NotFound, PermissionDenied, Unauthenticated

    try:
        return call()
    except Exception as err:
        cause = err.__cause__ if isinstance(err, TimeoutError) and isinstance(err.__cause__, Exception) else err
        said = f"{request}: {_message(cause)}"
        what, privilege = ("volume", "READ VOLUME") if "volume" in request else ("table", "SELECT")
        if isinstance(cause, NotFound):
            raise UnityCatalogTableNotFoundError(
                f"Unity Catalog {what} {name} not found in {host} (404 {said}): check the catalog, schema and {what} "
                f"names, and that you may see it (without USE CATALOG, USE SCHEMA and {privilege} a {what} looks "
                "missing)"
            ) from cause
        if isinstance(cause, Unauthenticated):
            raise UnityCatalogPermissionError(
                f"{host} did not accept the credentials sent to resolve {name} ({_status(401, cause)} {said}): set a "
                "valid, unexpired DATABRICKS_TOKEN (or profile, or service principal) for that workspace"
            ) from cause
        if isinstance(cause, PermissionDenied):
            raise UnityCatalogPermissionError(
                f"{host} refused {name} ({_status(403, cause)} {said}): {_grants(name, request)}"
            ) from cause
        raise UnityCatalogError(f"resolving Unity Catalog {what} {name} through {host} failed ({said})") from cause


def _grants(name: str, request: str) -> str:
    """The privileges ``request`` on table ``name`` needs."""
    catalog, schema, _ = name.split(".")
    if request in ("tables.get", "volumes.read"):
        privilege = "SELECT" if request == "tables.get" else "READ VOLUME"
        return f"reading it needs USE CATALOG on {catalog}, USE SCHEMA on {catalog}.{schema} and {privilege} on {name}"
    return (
        f"credential vending needs EXTERNAL USE SCHEMA on {catalog}.{schema} (granted by the catalog's owner) and "
        "the metastore's external data access enabled"
    )


@contextlib.contextmanager
def expired_credentials_named(name: str | None, expires_at: datetime | None) -> Iterator[None]:
    """Within, an error caused by the store answering ``ExpiredToken`` becomes ``UnityCatalogCredentialsExpiredError``.

    Args:
        name: the Unity Catalog table being read; None (a plain URI) changes nothing.
        expires_at: when its vended credentials expire, for the message.
    """
    try:
        yield
    except Exception as err:
        if name is None or not any("ExpiredToken" in str(cause) for cause in chain_of(err)):
            raise
        until = f" (vended until {expires_at.isoformat()})" if expires_at else ""
        raise UnityCatalogCredentialsExpiredError(
            f"the storage credentials vended for Unity Catalog table {name} expired while it was read{until}: "
            "read again (fresh credentials are vended for each read), and convert large tables in parts "
            "(predicate=) if one read outlasts them"
        ) from err
