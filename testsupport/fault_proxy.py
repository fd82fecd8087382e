"""A fault-injecting HTTP proxy in a thread of the test process, and the environment helpers around it.

``FaultProxy`` sits between a client and a loopback server (moto, fake-gcs-server, Azurite, the Files
API server); it can drop connections, delay, answer 500/503 or truncate bodies for requests that match
a rule. It also counts what passes: ``requests`` holds every request as it arrives, ``forwarded`` every
request the server answered, with its status, recorded before the client receives the answer, so a
count read after a client call returns is complete (no sleep, no server log to wait for).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The body of the request ``handler`` is answering, sent with a ``Content-Length`` or chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    chunks = []
    while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
        chunks.append(handler.rfile.read(size))
        handler.rfile.readline()  # the CRLF after each chunk
    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers, up to the empty line
        pass
    return b"".join(chunks)


@dataclass(frozen=True)
class Request:
    """One request a server answered, as a server's access log prints it."""

    method: str
    path: str  # /bucket/key, percent-decoded, without the query string
    query: str  # percent-decoded: "list-type=2&prefix=set/_versions/"
    status: int

    @classmethod
    def answered(cls, method: str, target: str, status: int) -> Request:
        """The request for ``target`` (path and query, as sent) that got ``status``."""
        path, _, query = target.partition("?")
        return cls(method, unquote(path), unquote(query), status)


@dataclass
class Fault:
    """What to do to the next ``times`` requests whose method and path match."""

    # "drop", "delay", "status", "truncate"; "lose": forwarded, then the reply is dropped; "hold": forwarded
    # once the test sets ``release`` (or after ``value`` seconds), so a test knows the request is still held;
    # "slowdown" (503 SlowDown) and "too_many" (429), with ``Retry-After: value`` unless ``value`` is 0;
    # "stall": no answer at all, the connection closed after ``value`` seconds (past the client's read timeout);
    # "ignore_range": forwarded without its Range header, so the whole file comes back (a store that ignores it)
    action: str
    path: str = ""  # a regular expression searched in "/bucket/key"
    method: str = "GET"
    times: int = 1
    value: float = 0  # seconds for "delay", the status code for "status", bytes kept for "truncate"
    hits: int = field(default=0)
    body: str = ""  # a regular expression searched in the request body too (GCS uploads name the object there)
    release: threading.Event = field(default_factory=threading.Event)  # ends a "hold"
    whole_only: bool = False  # only requests for a whole file (no Range header)
    ranged_only: bool = False  # only requests for part of a file (a Range header)


@dataclass
class RandomFaults:
    """Each request whose method and path match gets a fault with ``probability`` (a soak's steady failure rate).

    ``actions`` maps each kind to its ``Fault.value``; the kind is drawn by ``weights``, uniformly without. One
    seeded generator makes the decisions, so the sequence of decisions repeats for a seed (which request gets
    which one depends on how concurrent requests arrive). ``matched`` and ``injected`` count what happened.
    """

    probability: float
    actions: dict[str, float] = field(default_factory=lambda: {"drop": 0, "status": 503, "delay": 0.5, "truncate": 100})
    weights: dict[str, float] = field(default_factory=dict)  # kind -> relative weight (1 where absent)
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
        if self.weights:
            kind = self._rng.choices(self._kinds, [self.weights.get(kind, 1.0) for kind in self._kinds])[0]
        else:
            kind = self._rng.choice(self._kinds)
        self.injected[kind] = self.injected.get(kind, 0) + 1
        return Fault(kind, path, method, value=self.actions[kind], hits=1)


_PACE_CHUNK = 16 << 10
# action -> (status, S3's error code, the Databricks APIs' error code)
_THROTTLES = {
    "slowdown": (503, "SlowDown", "TEMPORARILY_UNAVAILABLE"),
    "too_many": (429, "TooManyRequests", "REQUEST_LIMIT_EXCEEDED"),
}


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a first batch read by byte ranges opens up to 64 connections at
    # once (mds_core.storage.s3.MAX_CONNECTIONS), and a loaded machine would reset the ones past the backlog.
    request_queue_size = 128


class FaultProxy:
    """An HTTP proxy in a thread of the test process, forwarding to ``upstream`` unless a fault matches."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.split("://", 1)[1]
        self.faults: list[Fault] = []
        self.random: RandomFaults | None = None  # consulted when no rule in ``faults`` matches
        self.requests: list[tuple[str, str]] = []  # (method, path and query) of every request received
        self.forwarded: list[Request] = []  # every request the upstream answered, before its answer goes on
        self.arrivals: list[float] = []  # time.monotonic() when each of ``requests`` arrived
        self.ranges: list[str | None] = []  # each of ``requests``' Range header, or None
        self.lock = threading.Lock()
        self.rate: float | None = None  # bytes/s over all responses together, like one node's link
        self.json_refusals = False  # "slowdown" and "too_many" answered as the Databricks APIs do (JSON), not as S3
        self._link_free_at = 0.0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = read_body(self)  # forwarded with a length
                with proxy.lock:
                    proxy.requests.append((self.command, self.path))
                    proxy.arrivals.append(time.monotonic())
                    proxy.ranges.append(self.headers.get("Range"))
                headers = dict(self.headers)
                fault = proxy.take_fault(self.command, self.path, body, ranged=self.headers.get("Range") is not None)
                if fault is not None and fault.action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None and fault.action == "delay":
                    time.sleep(fault.value)
                if fault is not None and fault.action == "hold":
                    fault.release.wait(fault.value)
                if fault is not None and fault.action == "status":
                    self._reply(
                        int(fault.value),
                        {"Content-Type": "application/xml"},
                        b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                    )
                    return
                if fault is not None and fault.action in _THROTTLES:
                    later = {"Retry-After": f"{fault.value:g}"} if fault.value else {}
                    status, kind, refusal = proxy.refusal(fault.action)
                    self._reply(status, {"Content-Type": kind, **later}, refusal)
                    return
                if fault is not None and fault.action == "stall":  # a connection that never answers
                    time.sleep(fault.value)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None and fault.action == "ignore_range":
                    headers = {name: value for name, value in headers.items() if name.lower() != "range"}
                status, headers, payload = proxy.forward(self.command, self.path, headers, body)
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

        self.server = _Server(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def refusal(self, action: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of a "slowdown" or "too_many": S3's XML, or the Databricks JSON error."""
        status, s3_code, databricks_code = _THROTTLES[action]
        message = "Please reduce your request rate."
        if self.json_refusals:
            return status, "application/json", json.dumps({"error_code": databricks_code, "message": message}).encode()
        return status, "application/xml", f"<Error><Code>{s3_code}</Code><Message>{message}</Message></Error>".encode()

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

    def take_fault(self, method: str, path: str, body: bytes = b"", ranged: bool = False) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if (
                    fault.hits < fault.times
                    and fault.method == method
                    and re.search(fault.path, path)
                    and (not fault.body or re.search(fault.body.encode(), body))
                    and not (fault.whole_only and ranged)
                    and not (fault.ranged_only and not ranged)
                ):
                    fault.hits += 1
                    return fault
            if self.random is not None:
                return self.random.draw(method, path)
        return None

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict, bytes]:
        """The upstream's answer to the request, recorded in ``forwarded`` before the caller passes it on."""
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            hop_by_hop = ("connection", "keep-alive", "transfer-encoding")  # the body goes on with a length
            headers = {k: v for k, v in headers.items() if k.lower() not in hop_by_hop}
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            status, answer_headers, payload = response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()
        with self.lock:
            self.forwarded.append(Request.answered(method, path, status))
        return status, answer_headers, payload

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
