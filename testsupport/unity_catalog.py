"""Unity Catalog's table and credential-vending REST API on 127.0.0.1, and an S3 front that checks vended keys.

``UnityCatalogServer`` serves what ``WorkspaceClient().tables.get``, ``.volumes.read`` and
``.temporary_table_credentials.generate_temporary_table_credentials`` (and its volume twin) call (checked against
``databricks/sdk/service/catalog.py``, which mirrors the public REST reference):

* ``GET /api/2.1/unity-catalog/tables/{full_name}``: a ``TableInfo`` (``full_name``, ``catalog_name``,
  ``schema_name``, ``name``, ``table_id``, ``table_type``, ``data_source_format``, ``storage_location``); 404
  ``TABLE_DOES_NOT_EXIST`` for a table never added; 403 ``PERMISSION_DENIED`` for a table in ``denied``.
* ``GET /api/2.1/unity-catalog/volumes/{full_name}``: a ``VolumeInfo`` (``volume_id``, ``storage_location``...)
  of a volume added with ``add_volume``; 404 ``VOLUME_DOES_NOT_EXIST`` otherwise.
* ``POST /api/2.0/unity-catalog/temporary-table-credentials`` with ``{"table_id", "operation"}`` (and
  ``temporary-volume-credentials`` with ``{"volume_id", "operation"}``, answered the same way):
  ``{"aws_temp_credentials": {"access_key_id", "secret_access_key", "session_token"}, "expiration_time", "url"}``,
  fresh keys each time, recorded in ``vended``. ``credential_lifetime_s`` below zero vends credentials that have
  already expired; ``vending = "disabled"`` answers 403 as a metastore without external data access does (the
  message says it is not enabled), ``"absent"`` 404 as a workspace without the endpoint; a schema in
  ``no_external_use`` answers 403 for want of EXTERNAL USE SCHEMA. ``cloud`` picks what is vended besides
  ``expiration_time`` and ``url``: ``"aws"`` (the default), ``"azure_sas"``, ``"azure_aad"`` or ``"gcp"``.

The HTTP plumbing, the bearer-token check (none: 401; a wrong one: 403) and ``/.well-known/databricks-config``
are ``FilesApiServer``'s. A token in ``expired_tokens`` answers 401 ``UNAUTHENTICATED``, as the service does to a
token past its lifetime.

``VendedKeyS3`` is a ``FaultProxy`` in front of moto (which takes any key) that passes only requests signed
with a key the catalog vended, with its session token: any other key is 403 ``InvalidAccessKeyId``, and a key
vended while ``expire_at_store`` was set is 400 ``ExpiredToken`` (S3's status for it), so a test knows the
credentials a read used came from the vending call.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

from testsupport.databricks_files import TOKEN, FilesApiServer, _error, _json
from testsupport.fault_proxy import FaultProxy

TABLES = "/api/2.1/unity-catalog/tables/"
CREDENTIALS = "/api/2.0/unity-catalog/temporary-table-credentials"
VOLUMES = "/api/2.1/unity-catalog/volumes/"
VOLUME_CREDENTIALS = "/api/2.0/unity-catalog/temporary-volume-credentials"
_SIGNED_BY = re.compile(r"Credential=([^/,\s]+)/")


class UnityCatalogServer(FilesApiServer):
    name = "unity-catalog"

    def __init__(self, log_dir: Path | None = None, *, token: str = TOKEN) -> None:
        super().__init__(log_dir, token=token)
        self.tables: dict[str, dict] = {}  # full name -> TableInfo as JSON
        self.volume_infos: dict[str, dict] = {}  # full name -> VolumeInfo as JSON
        self.denied_tables: set[str] = set()
        self.no_external_use: set[str] = set()  # catalog.schema without EXTERNAL USE SCHEMA for the caller
        self.expired_tokens: set[str] = set()
        self.vending = "on"  # "disabled": 403 not enabled; "absent": 404, no such endpoint
        self.cloud = "aws"
        self.credential_lifetime_s = 3600.0
        self.expire_at_store = False  # keys vended meanwhile are answered ExpiredToken by VendedKeyS3
        self.vended: list[dict] = []  # every aws_temp_credentials given out, with "expired_at_store"

    def add_table(
        self, full_name: str, storage_location: str, *, data_source_format: str = "DELTA", table_type: str = "EXTERNAL"
    ) -> str:
        """Register a table; returns its table id."""
        table_id = str(uuid.uuid4())
        kind = {"table_id": table_id, "table_type": table_type, "data_source_format": data_source_format}
        self.tables[full_name] = _info(full_name, storage_location) | kind
        return table_id

    def add_volume(self, full_name: str, storage_location: str) -> str:
        """Register an external volume; returns its volume id."""
        volume_id = str(uuid.uuid4())
        self.volume_infos[full_name] = _info(full_name, storage_location) | {
            "volume_id": volume_id,
            "volume_type": "EXTERNAL",
        }
        return volume_id

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], authorization: str | None, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if not (path.startswith((TABLES, VOLUMES)) or path in (CREDENTIALS, VOLUME_CREDENTIALS)):
            return super().answer(method, path, query, authorization, body)
        if authorization in {f"Bearer {token}" for token in self.expired_tokens}:
            return _error(401, "UNAUTHENTICATED", "The access token has expired.")
        if authorization != f"Bearer {self.token}":  # no token or a wrong one: the Files API's own answers
            return super().answer(method, path, query, authorization, body)
        if path in (CREDENTIALS, VOLUME_CREDENTIALS) and method == "POST":
            return self._vend(json.loads(body or b"{}"))
        if method == "GET" and path.startswith(VOLUMES):
            return self._volume(path[len(VOLUMES) :])
        if method == "GET":
            return self._table(path[len(TABLES) :])
        return _error(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {path}'")

    def _table(self, full_name: str) -> tuple[int, dict[str, str], bytes]:
        if full_name not in self.tables:
            return _error(404, "TABLE_DOES_NOT_EXIST", f"Table '{full_name}' does not exist.")
        if full_name in self.denied_tables:
            return _error(403, "PERMISSION_DENIED", f"User does not have SELECT on Table '{full_name}'.")
        return _json(200, self.tables[full_name])

    def _volume(self, full_name: str) -> tuple[int, dict[str, str], bytes]:
        if full_name not in self.volume_infos:
            return _error(404, "VOLUME_DOES_NOT_EXIST", f"Volume '{full_name}' does not exist.")
        return _json(200, self.volume_infos[full_name])

    def _vend(self, request: dict) -> tuple[int, dict[str, str], bytes]:
        if self.vending == "disabled":
            return _error(403, "PERMISSION_DENIED", "External data access is not enabled on the metastore.")
        if self.vending == "absent":
            return _error(404, "ENDPOINT_NOT_FOUND", f"No API found for 'POST {CREDENTIALS}'")
        kind = "volume" if "volume_id" in request else "table"
        found = [
            info
            for info in (*self.tables.values(), *self.volume_infos.values())
            if info.get(f"{kind}_id") == request.get(f"{kind}_id")
        ]
        if not found:
            return _error(
                404,
                f"{kind.upper()}_DOES_NOT_EXIST",
                f"{kind.title()} with id '{request.get(f'{kind}_id')}' does not exist.",
            )
        schema = f"{found[0]['catalog_name']}.{found[0]['schema_name']}"
        if schema in self.no_external_use:
            return _error(403, "PERMISSION_DENIED", f"User does not have EXTERNAL USE SCHEMA on Schema '{schema}'.")
        credentials = {
            "access_key_id": f"ASIA{uuid.uuid4().hex[:16].upper()}",
            "secret_access_key": uuid.uuid4().hex,
            "session_token": f"vended-{uuid.uuid4().hex}",
        }
        with self.lock:
            self.vended.append({**credentials, "expired_at_store": self.expire_at_store})
        expires = int((time.time() + self.credential_lifetime_s) * 1000)
        answer = {"expiration_time": expires, "url": found[0]["storage_location"]}
        return _json(200, answer | _CLOUDS.get(self.cloud, {"aws_temp_credentials": credentials}))


def _info(full_name: str, storage_location: str) -> dict[str, str]:
    """The fields a TableInfo and a VolumeInfo share: the names and the storage location."""
    catalog, schema, name = full_name.split(".")
    names = {"full_name": full_name, "catalog_name": catalog, "schema_name": schema, "name": name}
    return names | {"storage_location": storage_location}


_CLOUDS = {
    "azure_sas": {"azure_user_delegation_sas": {"sas_token": "sv=2026-01-01&sig=vended"}},
    "azure_aad": {"azure_aad": {"aad_token": "eyJ.vended.aad"}},
    "gcp": {"gcp_oauth_token": {"oauth_token": "ya29.vended"}},
}


class VendedKeyS3(FaultProxy):
    """A proxy to moto that passes only requests signed with a key ``catalog`` vended (see the module's docstring)."""

    def __init__(self, upstream: str, catalog: UnityCatalogServer, accepted: frozenset[str] = frozenset()) -> None:
        super().__init__(upstream)
        self.catalog, self.accepted = catalog, accepted  # accepted: keys of the caller's own, taken as they are
        self.refused: list[str] = []  # the error code of every request refused

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict, bytes]:
        lowered = {name.lower(): value for name, value in headers.items()}
        signed = _SIGNED_BY.search(lowered.get("authorization", ""))
        key = signed[1] if signed else ""
        vended = {c["access_key_id"]: c for c in self.catalog.vended}.get(key)
        if key in self.accepted:
            return super().forward(method, path, headers, body)
        if vended is None or lowered.get("x-amz-security-token") != vended["session_token"]:
            return self._refuse(403, "InvalidAccessKeyId", f"The AWS access key id {key!r} is not one vended.")
        if vended["expired_at_store"]:
            return self._refuse(400, "ExpiredToken", "The provided token has expired.")
        return super().forward(method, path, headers, body)

    def _refuse(self, status: int, code: str, message: str) -> tuple[int, dict, bytes]:
        with self.lock:
            self.refused.append(code)
        payload = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        )
        return status, {"Content-Type": "application/xml"}, payload.encode()
