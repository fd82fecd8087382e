"""A real S3-compatible server for the tests (moto in its own process) and a fault-injecting proxy.

``MotoServer`` runs ``python -m moto.server`` on a free loopback port and reads its access log,
so tests can count the requests each object received. ``FaultProxy`` is a small HTTP proxy put
between a client and the server; it can drop connections, delay, answer 500/503 or truncate
bodies for requests that match a rule.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_LOG_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Request:
    method: str
    path: str  # /bucket/key, without the query string
    query: str
    status: int


class MotoServer:
    """``moto.server`` in a subprocess on 127.0.0.1; its stderr is the request log."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / "moto.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_up()

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited: {self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto server did not start within 60 s")

    def new_bucket(self) -> str:
        """A fresh, empty bucket, so tests never see each other's objects."""
        import boto3

        name = f"t-{uuid.uuid4().hex[:16]}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def log_position(self) -> int:
        self._log.flush()
        return self.log_path.stat().st_size

    def requests(self, since: int = 0) -> list[Request]:
        """Requests the server logged after byte ``since`` of its log."""
        time.sleep(0.2)  # the server writes a line after it has sent the response
        with open(self.log_path, "rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        found = []
        for match in _LOG_LINE.finditer(text):
            path, _, query = match["path"].partition("?")
            found.append(Request(match["method"], path, query, int(match["status"])))
        return found

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


def object_gets(requests: list[Request], bucket: str) -> dict[str, int]:
    """How many GETs each object key received (listings and bucket-level calls left out)."""
    counts: dict[str, int] = {}
    for request in requests:
        if request.method == "GET" and request.path.startswith(f"/{bucket}/") and "list-type" not in request.query:
            key = request.path[len(bucket) + 2 :]
            if key:
                counts[key] = counts.get(key, 0) + 1
    return counts


@dataclass
class Fault:
    """What to do to the next ``times`` requests whose method and path match."""

    action: str  # "drop", "delay", "status", "truncate"; "lose": forwarded, then the reply is dropped
    path: str = ""  # a regular expression searched in "/bucket/key"
    method: str = "GET"
    times: int = 1
    value: float = 0  # seconds for "delay", the status code for "status", bytes kept for "truncate"
    hits: int = field(default=0)
    body: str = ""  # a regular expression searched in the request body too (GCS uploads name the object there)


@dataclass
class RandomFaults:
    """Each request whose method and path match gets a fault with ``probability`` (a soak's steady failure rate).

    ``actions`` maps each kind to its ``Fault.value``; the kind is drawn uniformly. One seeded generator
    makes the decisions, so the sequence of decisions repeats for a seed (which request gets which
    one depends on how concurrent requests arrive). ``matched`` and ``injected`` count what happened.
    """

    probability: float
    actions: dict[str, float] = field(default_factory=lambda: {"drop": 0, "status": 503, "delay": 0.5, "truncate": 100})
    seed: int = 0
    path: str = ""
    method: str = "GET"
    matched: int = 0
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._kinds = sorted(self.actions)

    def draw(self, method: str, path: str) -> Fault | None:
        """A one-off fault for this request, or None (call under the proxy's lock)."""
        if method != self.method or not re.search(self.path, path):
            return None
        self.matched += 1
        if self._rng.random() >= self.probability:
            return None
        kind = self._rng.choice(self._kinds)
        self.injected[kind] = self.injected.get(kind, 0) + 1
        return Fault(kind, path, method, value=self.actions[kind], hits=1)


_PACE_CHUNK = 16 << 10


class FaultProxy:
    """An HTTP proxy in a thread of the test process, forwarding to ``upstream`` unless a fault matches."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.split("://", 1)[1]
        self.faults: list[Fault] = []
        self.random: RandomFaults | None = None  # consulted when no rule in ``faults`` matches
        self.requests: list[tuple[str, str]] = []  # (method, path and query) of every request received
        self.arrivals: list[float] = []  # time.monotonic() when each of ``requests`` arrived
        self.lock = threading.Lock()
        self.rate: float | None = None  # bytes/s over all responses together, like one node's link
        self._link_free_at = 0.0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    proxy.requests.append((self.command, self.path))
                    proxy.arrivals.append(time.monotonic())
                fault = proxy.take_fault(self.command, self.path, body)
                if fault is not None and fault.action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None and fault.action == "delay":
                    time.sleep(fault.value)
                if fault is not None and fault.action == "status":
                    self._reply(
                        int(fault.value),
                        {"Content-Type": "application/xml"},
                        b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                    )
                    return
                status, headers, payload = proxy.forward(self.command, self.path, dict(self.headers), body)
                if fault is not None and fault.action == "lose":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None and fault.action == "truncate":
                    self._reply(status, headers, payload[: int(fault.value)], length=len(payload))
                    self.close_connection = True
                    return
                self._reply(status, headers, payload)

            def _reply(self, status: int, headers: dict, payload: bytes, length: int | None = None) -> None:
                if self.command == "HEAD" and length is None:  # a HEAD's length is the object's, not the body's
                    length = int({k.lower(): v for k, v in headers.items()}.get("content-length") or 0)
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    proxy.send_paced(self.wfile, payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def send_paced(self, out: Any, payload: bytes) -> None:
        """Write ``payload``; with a ``rate``, chunks share one link: each waits for its slot on it."""
        if not self.rate:
            out.write(payload)
            return
        for begin in range(0, len(payload), _PACE_CHUNK):
            chunk = payload[begin : begin + _PACE_CHUNK]
            with self.lock:
                slot_end = max(time.monotonic(), self._link_free_at) + len(chunk) / self.rate
                self._link_free_at = slot_end
            time.sleep(max(0.0, slot_end - time.monotonic()))
            out.write(chunk)

    def add(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()

    def take_fault(self, method: str, path: str, body: bytes = b"") -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if (
                    fault.hits < fault.times
                    and fault.method == method
                    and re.search(fault.path, path)
                    and (not fault.body or re.search(fault.body.encode(), body))
                ):
                    fault.hits += 1
                    return fault
            if self.random is not None:
                return self.random.draw(method, path)
        return None

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in headers.items() if k.lower() not in ("connection", "keep-alive")}
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment for clients of the test server (subprocesses included)."""
    return {
        "S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def apply_env(env: dict[str, str]) -> dict[str, str | None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    return saved


def restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def fault_proxy_for(server: Any) -> Iterator[FaultProxy]:
    """A FaultProxy in front of ``server`` (anything with ``endpoint`` and ``env(endpoint)``); the clients'
    environment points at the proxy meanwhile."""
    proxy = FaultProxy(server.endpoint)
    saved = apply_env(server.env(proxy.endpoint))
    try:
        yield proxy
    finally:
        restore_env(saved)
        proxy.stop()
