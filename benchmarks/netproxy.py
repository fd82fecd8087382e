#!/usr/bin/env python3
"""A TCP proxy that puts a network between HTTP clients and a store on 127.0.0.1: latency, bandwidth, counts.

It forwards every connection to ``--upstream`` (``host:port``) and

* adds ``latency`` seconds to each response's first byte: every byte a client sends (request lines,
  headers, bodies) reaches the server that much later, as over a link with that round-trip time, and
  a new connection's first byte waits one more ``latency`` (the TCP handshake's round trip);
* caps the download rate, if asked: ``node_rate`` bytes/s shared by every connection (one node's
  link) and/or ``conn_rate`` bytes/s per connection (a per-flow limit);
* parses both directions as HTTP/1.1 (keep-alive, ``Content-Length`` and chunked bodies) to record
  every request: method, target, when its first byte arrived, when its response began and ended,
  and the response's size. From those come the counts per kind (object GET, HEAD, listing...),
  the bytes downloaded and the mean number of GETs in flight;
* reports its own CPU seconds, so a report can show that the proxy was not the bottleneck.

It runs in a process of its own (standard library only) and is driven over stdin/stdout, one JSON
object per line: ``{"cmd": "stats"}`` answers the counters and the list of requests since the last
``{"cmd": "reset"}``; ``{"cmd": "active"}`` answers how many connections are open; ``{"cmd": "set", "latency": 0.025, "node_rate": 5e7, "conn_rate": null}``
changes the network for new bytes; end of input stops it. ``NetProxy`` is the parent's handle::

    proxy = NetProxy("127.0.0.1:9000", latency=0.025)   # proxy.endpoint: http://127.0.0.1:<port>
    ...; stats = proxy.stats(); proxy.close()
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

_READ = 1 << 20  # bytes per read from either side
_PACE = 64 << 10  # bytes per paced write under a bandwidth cap
_SLACK = 0.005  # seconds: see Proxy._paced


# ----------------------------------------------------------------------------- HTTP/1.1 framing


@dataclass
class Exchange:
    """One request and its response, as seen at the proxy (time.time() seconds)."""

    method: str
    target: str
    sent: float  # the request's first byte arrived from the client
    first: float = 0.0  # the response's first byte arrived from the server
    done: float = 0.0  # the response's last byte was handed to the client
    status: int = 0
    bytes: int = 0  # response bytes, head included

    def row(self) -> list[Any]:
        return [self.method, self.target, self.sent, self.first, self.done, self.status, self.bytes]


class _Framer:
    """Splits one direction of an HTTP/1.1 connection into messages, incrementally.

    ``feed(data)`` returns the events it completed: ``("head", first_line, headers)`` when a
    message's head is complete and ``("end",)`` when its body is. A response's body length depends
    on the request's method (HEAD has none), so the response side is told each one's method.
    """

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.state = "head"
        self.remaining = 0
        self.methods: deque[str] = deque()  # response side: methods of requests not yet answered
        self.broken = False

    def feed(self, data: bytes, responses: bool) -> list[tuple[Any, ...]]:
        if self.broken:
            return []
        events: list[tuple[Any, ...]] = []
        at, size = 0, len(data)
        while at < size or (self.buffer and self.state not in ("body", "chunk-data", "until-close")):
            if self.state in ("body", "chunk-data"):  # skipped, never copied
                take = min(self.remaining, size - at)
                at += take
                self.remaining -= take
                if self.remaining:
                    return events
                if self.state == "body":
                    events.append(("end",))
                    self.state = "head"
                else:
                    self.state = "chunk-size"
                continue
            if self.state == "until-close":  # the body ends with the connection
                return events
            # a head, a chunk-size line or a trailer: gathered in the buffer
            marker = b"\r\n\r\n" if self.state == "head" else b"\r\n"
            self.buffer += data[at:]
            at = size
            end = self.buffer.find(marker)
            if end < 0:
                if len(self.buffer) > 1 << 20:
                    self.broken = True  # not HTTP: stop looking
                return events
            text = bytes(self.buffer[:end])
            rest = bytes(self.buffer[end + len(marker) :])
            self.buffer.clear()
            data, at, size = rest, 0, len(rest)
            if self.state == "head":
                self._head(text.decode("latin-1").split("\r\n"), responses, events)
            elif self.state == "chunk-size":
                length = int(text.split(b";")[0].strip() or b"0", 16)
                self.state, self.remaining = ("trailer", 0) if length == 0 else ("chunk-data", length + 2)
            elif not text:  # the empty line that ends the trailer
                events.append(("end",))
                self.state = "head"
        return events

    def _head(self, head: list[str], responses: bool, events: list[tuple[Any, ...]]) -> None:
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        method = self.methods.popleft() if responses and self.methods else ""
        words = head[0].split()
        status = int(words[1]) if responses and len(words) > 1 and words[1].isdigit() else 0
        if responses and 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            self.methods.appendleft(method)
            return
        events.append(("head", head[0], headers))
        if responses and (method == "HEAD" or status in (204, 304)):
            events.append(("end",))
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = "chunk-size"
        elif "content-length" in headers:
            self.remaining, self.state = int(headers["content-length"]), "body"
            if not self.remaining:
                events.append(("end",))
                self.state = "head"
        elif responses:
            self.state = "until-close"
        else:
            events.append(("end",))  # a request without a body


# ----------------------------------------------------------------------------- the proxy


@dataclass
class Network:
    latency: float = 0.0  # seconds added to each response's first byte (and to a new connection)
    node_rate: float | None = None  # bytes/s of all downloads together
    conn_rate: float | None = None  # bytes/s of each connection's downloads


@dataclass
class Proxy:
    upstream: tuple[str, int]
    network: Network
    exchanges: list[Exchange] = field(default_factory=list)
    connections: int = 0
    bytes_down: int = 0
    bytes_up: int = 0
    active: int = 0  # connections open now
    _link_free_at: float = 0.0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        try:
            await self._relay(reader, writer)
        finally:
            self.active -= 1

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        opened = time.monotonic()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        for stream in (writer, up_writer):
            sock = stream.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending: deque[Exchange] = deque()  # requests of this connection awaiting their response
        framer_up, framer_down = _Framer(), _Framer()
        handshake = self.network.latency  # a new connection costs one round trip before its first byte
        tasks = [
            asyncio.ensure_future(self._uplink(reader, up_writer, framer_up, framer_down, pending, opened + handshake)),
            asyncio.ensure_future(self._downlink(up_reader, writer, framer_down, pending)),
        ]
        with contextlib.suppress(asyncio.CancelledError):  # the proxy is stopping
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for stream in (writer, up_writer):
            stream.close()

    async def _uplink(
        self,
        reader: asyncio.StreamReader,
        out: asyncio.StreamWriter,
        framer: _Framer,
        responses: _Framer,
        pending: deque[Exchange],
        not_before: float,
    ) -> None:
        """Client to server: each byte held ``latency`` seconds (order kept), requests recorded."""
        line: deque[tuple[float, bytes]] = deque()
        wake = asyncio.Event()
        closed = False

        async def deliver() -> None:
            while True:
                while not line:
                    if closed:
                        out.write_eof() if out.can_write_eof() else None
                        return
                    wake.clear()
                    await wake.wait()
                due, data = line.popleft()
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                out.write(data)
                await out.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            in_message = False
            while data := await reader.read(_READ):
                now, wall = time.monotonic(), time.time()
                if not in_message:  # the first bytes of a request: it starts now
                    in_message = True
                    start_wall = wall
                for event in framer.feed(data, responses=False):
                    if event[0] == "head":
                        method, target = (event[1].split() + ["", ""])[:2]
                        exchange = Exchange(method, target, start_wall)
                        pending.append(exchange)
                        self.exchanges.append(exchange)
                        responses.methods.append(method)
                    elif event[0] == "end":
                        start_wall = wall  # pipelined bytes in the same read belong to the next request
                in_message = framer.state != "head" or bool(framer.buffer)
                self.bytes_up += len(data)
                line.append((max(now, not_before) + self.network.latency, data))
                wake.set()
        finally:
            closed = True
            wake.set()
            await sender

    async def _downlink(
        self, reader: asyncio.StreamReader, out: asyncio.StreamWriter, framer: _Framer, pending: deque[Exchange]
    ) -> None:
        """Server to client: paced under the caps; each response's first and last byte timed."""
        conn_free_at = 0.0
        current: Exchange | None = None  # the exchange whose response is arriving
        while data := await reader.read(_READ):
            arrived = time.time()
            if current is None and pending:
                current = pending[0]
                current.first = current.first or arrived
            if self.network.node_rate or self.network.conn_rate:
                conn_free_at = await self._paced(out, data, conn_free_at)
            else:
                out.write(data)
                await out.drain()
            self.bytes_down += len(data)
            if current is not None:
                current.bytes += len(data)  # a read that spans two responses counts for the first
            for event in framer.feed(data, responses=True):
                if event[0] == "head" and pending:
                    current = pending[0]
                    current.first = current.first or arrived
                    parts = event[1].split()
                    current.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
                elif event[0] == "end" and pending:
                    pending.popleft().done = time.time()
                    current = None
        for exchange in pending:  # read until close
            exchange.done = exchange.done or time.time()

    async def _paced(self, out: asyncio.StreamWriter, data: bytes, conn_free_at: float) -> float:
        """Write ``data`` in slices, each waiting for its slot on the node's link and on this connection's."""
        view = memoryview(data)
        for begin in range(0, len(data), _PACE):
            chunk = view[begin : begin + _PACE]
            now = time.monotonic()
            slot = now
            # A link idle for less than _SLACK is not idle: a sleep woken late (timer granularity)
            # must not cost the link its rate, or one connection alone would get well under the cap.
            if self.network.node_rate:
                self._link_free_at = max(now - _SLACK, self._link_free_at) + len(chunk) / self.network.node_rate
                slot = self._link_free_at
            if self.network.conn_rate:
                conn_free_at = max(now - _SLACK, conn_free_at) + len(chunk) / self.network.conn_rate
                slot = max(slot, conn_free_at)
            if slot > now:
                await asyncio.sleep(slot - now)
            out.write(chunk)
            await out.drain()
        return conn_free_at

    def stats(self) -> dict[str, Any]:
        usage = os.times()
        return {
            "cpu_seconds": usage.user + usage.system,
            "connections": self.connections,
            "active": self.active,
            "bytes_down": self.bytes_down,
            "bytes_up": self.bytes_up,
            "exchanges": [exchange.row() for exchange in self.exchanges],
        }

    def reset(self) -> None:
        self.exchanges, self.connections, self.bytes_down, self.bytes_up = [], 0, 0, 0


async def _serve(proxy: Proxy, port: int) -> None:
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port, limit=_READ)
    bound = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    control = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(control), sys.stdin)
    print(json.dumps({"port": bound}), flush=True)
    while line := await control.readline():
        command = json.loads(line)
        if command["cmd"] == "stats":
            answer = proxy.stats()
        elif command["cmd"] == "active":
            answer = {"active": proxy.active}
        elif command["cmd"] == "reset":
            proxy.reset()
            answer = {"ok": True}
        elif command["cmd"] == "set":
            for name in ("latency", "node_rate", "conn_rate"):
                if name in command:
                    setattr(proxy.network, name, command[name])
            answer = {"ok": True}
        else:
            answer = {"error": f"unknown command {command['cmd']!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    server.close()


# ----------------------------------------------------------------------------- the parent's handle


class NetProxy:
    """The proxy in a child process (``sys.executable``); ``endpoint`` is its URL."""

    def __init__(
        self,
        upstream: str,
        *,
        latency: float = 0.0,
        node_rate: float | None = None,
        conn_rate: float | None = None,
        python: str | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            [python or sys.executable, os.path.abspath(__file__), "--upstream", upstream],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        hello = self.process.stdout.readline()
        if not hello:
            raise RuntimeError("the network proxy did not start")
        self.port = json.loads(hello)["port"]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.set(latency=latency, node_rate=node_rate, conn_rate=conn_rate)

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def set(self, **network: Any) -> None:
        self._ask({"cmd": "set", **network})

    def reset(self) -> None:
        self._ask({"cmd": "reset"})

    def stats(self) -> dict[str, Any]:
        return self._ask({"cmd": "stats"})

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no connection is open (a finished measurement's abandoned transfers are over)."""
        deadline = time.monotonic() + timeout
        while self._ask({"cmd": "active"})["active"]:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ----------------------------------------------------------------------------- reading the record


def kind_of(method: str, target: str) -> str:
    """``get`` (an object's bytes), ``head``, ``list``, ``meta`` (GCS object metadata), ``put`` or ``other``."""
    path, _, query = target.partition("?")
    if method == "HEAD":
        return "head"
    if method in ("PUT", "POST"):
        return "put"
    if method != "GET":
        return "other"
    if path.startswith(("/storage/v1/b/", "/download/storage/v1/b/")):  # GCS JSON API
        if "/o/" not in path:
            return "list" if path.rstrip("/").endswith("/o") else "meta"
        return "get" if "alt=media" in query else "meta"
    parts = path.strip("/").split("/", 1)
    if len(parts) < 2 or not parts[1] or "list-type" in query or "prefix=" in query:
        return "list"  # S3: a bucket-level GET is a listing
    return "get"


def summarize(exchanges: list[list[Any]], shard_suffixes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Counts per kind, shard GETs, and the mean shard GETs in flight while any was.

    ``shard_suffixes``: a GET whose object path ends with one of these is a shard's (by default,
    every object GET but ``index.json``).
    """
    counts: dict[str, int] = {}
    spans: list[tuple[float, float]] = []
    shard_gets, first_shard, index_at = 0, None, None
    for method, target, sent, _first, done, _status, _size in exchanges:
        kind = kind_of(method, target)
        counts[kind] = counts.get(kind, 0) + 1
        path = target.partition("?")[0]
        if kind == "get" and "index.json" in path:
            index_at = sent if index_at is None else min(index_at, sent)
        elif kind == "get" and (not shard_suffixes or path.endswith(shard_suffixes)):
            shard_gets += 1
            first_shard = sent if first_shard is None else min(first_shard, sent)
            spans.append((sent, done or sent))
    busy, total, edge = 0.0, 0.0, None
    for start, end in sorted(spans):
        total += end - start
        if edge is None or start > edge:
            busy += end - start
            edge = end
        elif end > edge:
            busy += end - edge
            edge = end
    return {
        "counts": counts,
        "shard_gets": shard_gets,
        "in_flight": total / busy if busy else None,
        "first_shard_get": first_shard,
        "index_get": index_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="host:port of the server")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    asyncio.run(_serve(Proxy((host, int(port)), Network()), args.port))


if __name__ == "__main__":
    main()
