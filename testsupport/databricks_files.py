"""The Databricks Files API (Unity Catalog volumes) on 127.0.0.1 for the tests, in a thread of the test process.

It serves the documented endpoints the SDK's ``WorkspaceClient().files`` calls (checked against
``databricks/sdk/service/files.py``), in memory, with the documented status codes:

* ``PUT /api/2.0/fs/files{path}?overwrite=true|false``: the body is the file (``Content-Length`` or
  chunked); 409 ``ALREADY_EXISTS`` if the file exists and ``overwrite=false``; missing parent
  directories are created (with ``upload_creates_parents = False``, 404 instead); 404 if the volume
  does not exist.
* ``GET``/``HEAD /api/2.0/fs/files{path}``: the bytes (or only the headers) with ``Content-Length``,
  ``Content-Type`` and ``Last-Modified``; 404 if missing. ``DELETE``: 404 if missing.
* ``GET /api/2.0/fs/directories{path}?page_size=&page_token=``: ``{"contents": [{"path", "is_directory",
  "file_size", "last_modified", "name"}], "next_page_token"}``, in pages of ``page_size`` entries (3 by
  default, to exercise paging); ``PUT`` (``mkdir -p``), ``HEAD`` and ``DELETE`` (409 if not empty).
* ``GET /.well-known/databricks-config``, which the SDK probes when a client is created (404 with
  ``host_metadata = False``, as on workspaces that do not serve it).

Every ``/api/`` request needs ``Authorization: Bearer <token>``: none is 401 ``UNAUTHENTICATED``, a
wrong one 403 with the error code ``"403"`` (the service's own answer to a bad token); volumes in
``denied`` answer 403 ``PERMISSION_DENIED`` to everyone. Errors are JSON
``{"error_code", "message"}`` like the service's; ``throttle()`` makes the service itself answer 503 or
429 with ``Retry-After`` (what the SDK's own retry loop retries). ``requests`` logs ``(method, path and
query)`` of every request.

The interface matches ``testsupport/emulators.py``: ``new_root()``, ``env(endpoint)``, ``object_gets``,
``upload_fault``, ``download_fault``, so the test matrix of tests/storage/test_stores.py runs on it unchanged.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from testsupport.fault_proxy import Fault, free_port, read_body

FILES, DIRECTORIES = "/api/2.0/fs/files", "/api/2.0/fs/directories"
TOKEN = "dapi-loopback-test-token"


class FilesApiServer:
    name, scheme = "databricks-files", "dbfs"

    def __init__(self, log_dir: Path | None = None, *, token: str = TOKEN, page_size: int = 3) -> None:
        self.token, self.page_size = token, page_size
        self.files: dict[str, tuple[bytes, float]] = {}  # path -> (bytes, modification time)
        self.directories: set[str] = set()
        self.volumes: set[str] = set()  # /Volumes/<catalog>/<schema>/<volume>
        self.denied: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        self.upload_creates_parents = True  # False: an upload into a missing directory is 404, as some services do
        self.throttles: list[Fault] = []  # answered by the service itself: see throttle()
        self.retry_after: dict[int, int] = {}  # id(throttle) -> its Retry-After in seconds
        self.host_metadata = True  # False: /.well-known/databricks-config is 404, as on older workspaces
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = read_body(self)
                with server.lock:
                    server.requests.append((self.command, self.path))
                url = urlsplit(self.path)
                status, headers, payload = server.answer(
                    self.command, unquote(url.path), parse_qs(url.query), self.headers.get("Authorization"), body
                )
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # ---------------------------------------------------------------------------------------------
    # the tests' side

    def new_root(self, catalog: str = "main", schema: str = "default") -> str:
        """A fresh, empty volume, as a ``dbfs:`` URL."""
        volume = f"/Volumes/{catalog}/{schema}/t_{uuid.uuid4().hex[:16]}"
        with self.lock:
            self.volumes.add(volume)
            self.directories.add(volume)
        return f"dbfs:{volume}"

    def throttle(self, method: str, path: str, status: int = 503, times: int = 1, retry_after: int = 1) -> Fault:
        """The next ``times`` requests matching ``method`` and ``path`` (a regular expression) get the
        service's own JSON error, ``TEMPORARILY_UNAVAILABLE`` (503) or ``REQUEST_LIMIT_EXCEEDED`` (429),
        with ``Retry-After: <retry_after>``: the service asking to be called again later."""
        fault = Fault("status", path=path, method=method, times=times, value=status)
        with self.lock:
            self.throttles.append(fault)
            self.retry_after[id(fault)] = retry_after
        return fault

    def env(self, endpoint: str) -> dict[str, str]:
        return {"DATABRICKS_HOST": endpoint, "DATABRICKS_TOKEN": self.token}

    @staticmethod
    def upload_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, method="PUT", path=rf"^{FILES}/[^?]*{key}", **kwargs)

    @staticmethod
    def download_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, path=rf"^{FILES}/[^?]*{key}", **kwargs)

    @staticmethod
    def object_gets(requests: list[tuple[str, str]], root: str) -> dict[str, int]:
        """GETs of each file's bytes under ``root`` (a ``dbfs:`` URL), keyed by the path below it."""
        prefix = f"{FILES}{root.split(':', 1)[1].rstrip('/')}/"
        counts: dict[str, int] = {}
        for method, target in requests:
            path = unquote(urlsplit(target).path)
            if method == "GET" and path.startswith(prefix):
                key = path[len(prefix) :]
                counts[key] = counts.get(key, 0) + 1
        return counts

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---------------------------------------------------------------------------------------------
    # the service's side

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], authorization: str | None, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if path == "/.well-known/databricks-config" and method == "GET" and self.host_metadata:
            return _json(200, {"oidc_endpoint": f"{self.endpoint}/oidc", "workspace_id": "1234567890"})
        if not path.startswith("/api/"):
            return _error(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {path}'")
        if not authorization:
            return _error(401, "UNAUTHENTICATED", "Credential was not sent or was of an unsupported type for this API.")
        if authorization != f"Bearer {self.token}":  # the service's own answer: the status as the code
            return _error(403, "403", "Invalid access token.")
        with self.lock:
            for fault in self.throttles:
                if fault.hits < fault.times and fault.method == method and re.search(fault.path, path):
                    fault.hits += 1
                    code = "REQUEST_LIMIT_EXCEEDED" if fault.value == 429 else "TEMPORARILY_UNAVAILABLE"
                    status, headers, payload = _error(int(fault.value), code, "injected by the test")
                    return status, {**headers, "Retry-After": str(self.retry_after[id(fault)])}, payload
        for kind, prefix in (("file", FILES), ("directory", DIRECTORIES)):
            if path.startswith(prefix + "/"):
                target = "/" + path[len(prefix) :].strip("/")
                volume = "/".join(target.split("/")[:5])
                dotted = volume[len("/Volumes/") :].replace("/", ".")  # catalog.schema.volume
                if volume in self.denied:
                    return _error(403, "PERMISSION_DENIED", f"User does not have READ VOLUME on Volume '{dotted}'.")
                with self.lock:
                    if volume not in self.volumes:
                        return _error(404, "NOT_FOUND", f"Volume '{dotted}' does not exist.")
                    if kind == "file":
                        return self._file(method, target, query, body)
                    return self._directory(method, target, query)
        return _error(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {path}'")

    def _file(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, dict, bytes]:
        found = self.files.get(path)
        if method == "PUT":
            if path in self.directories:
                return _error(409, "ALREADY_EXISTS", f"A directory exists at {path}.")
            overwrite = query.get("overwrite", ["true"])[0] != "false"
            if found is not None and not overwrite:
                return _error(409, "ALREADY_EXISTS", "The file being created already exists.")
            parent = path.rsplit("/", 1)[0]
            if not self.upload_creates_parents and parent not in self.directories:
                return _error(404, "NOT_FOUND", f"The parent directory {parent} does not exist.")
            self.files[path] = (body, time.time())
            while parent.count("/") >= 4:
                self.directories.add(parent)
                parent = parent.rsplit("/", 1)[0]
            return 204, {}, b""
        if found is None:
            return _error(404, "NOT_FOUND", f"The file {path} does not exist.")
        if method == "DELETE":
            del self.files[path]
            return 204, {}, b""
        data, modified = found
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(len(data)),
            "Last-Modified": formatdate(modified, usegmt=True),
        }
        if method in ("GET", "HEAD"):
            return 200, headers, data
        return _error(405, "METHOD_NOT_ALLOWED", f"{method} is not supported on files.")

    def _directory(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, dict, bytes]:
        if method == "PUT":
            if path in self.files:
                return _error(409, "ALREADY_EXISTS", f"A file exists at {path}.")
            while path.count("/") >= 4:
                self.directories.add(path)
                path = path.rsplit("/", 1)[0]
            return 204, {}, b""
        if path not in self.directories:
            return _error(404, "NOT_FOUND", f"The directory {path} does not exist.")
        children = self._children(path)
        if method == "HEAD":
            return 200, {}, b""
        if method == "DELETE":
            if path.count("/") == 4:
                return _error(400, "BAD_REQUEST", "A volume's root directory cannot be deleted.")
            if children:
                return _error(409, "DIRECTORY_NOT_EMPTY", f"The directory {path} is not empty.")
            self.directories.discard(path)
            return 204, {}, b""
        if method != "GET":
            return _error(405, "METHOD_NOT_ALLOWED", f"{method} is not supported on directories.")
        size = min(int(query.get("page_size", [1000])[0]), 1000, self.page_size)
        start = int(query.get("page_token", ["0"])[0])
        page = children[start : start + size]
        answer: dict = {"contents": page}
        if start + size < len(children):
            answer["next_page_token"] = str(start + size)
        return _json(200, answer)

    def _children(self, path: str) -> list[dict]:
        prefix, entries = path + "/", []
        for directory in self.directories:
            if directory.startswith(prefix) and "/" not in directory[len(prefix) :]:
                entries.append({"path": directory + "/", "is_directory": True, "name": directory[len(prefix) :]})
        for name, (data, modified) in self.files.items():
            if name.startswith(prefix) and "/" not in name[len(prefix) :]:
                entry = {"path": name, "is_directory": False, "name": name[len(prefix) :]}
                entries.append({**entry, "file_size": len(data), "last_modified": int(modified * 1000)})
        return sorted(entries, key=lambda e: e["name"])


def _json(status: int, payload: dict) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    return _json(status, {"error_code": code, "message": message})
