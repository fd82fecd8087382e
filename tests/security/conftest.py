"""What several findings' tests share: a loopback listener standing in for another host, and a one-column
dataset (``x``) written plainly or as a shard-set version."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mds_core import MDSWriter
from mds_core.versions import ShardSet


class Listener:
    """A loopback TCP server standing in for the attacker's host: it records every request's first bytes and
    answers ``status`` (404 by default, so a client that reached it fails quickly instead of retrying for long).
    """

    def __init__(self, status: str = "404 Not Found") -> None:
        self.received: list[bytes] = []
        self._reply = f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def authorizations(self) -> list[str | None]:
        """Each request's Authorization header (None: it had none)."""
        headers = [re.search(rb"^authorization: *(.*?)\r?$", r, re.IGNORECASE | re.MULTILINE) for r in self.received]
        return [header[1].decode() if header else None for header in headers]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    self.received.append(connection.recv(65536))
                    connection.sendall(self._reply)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def write_ids(out: str, ids: range | list[int], **kwargs: Any) -> str:
    """A dataset of one ``int`` column ``x`` holding ``ids``, at ``out``; ``out``."""
    with MDSWriter(out=out, columns={"x": "int"}, **kwargs) as writer:
        for i in ids:
            writer.write({"x": i})
    return out


def commit_ids(shard_set: ShardSet, ids: range | list[int], **kwargs: Any) -> None:
    """A version of ``shard_set`` holding only ``ids`` (an overwrite); ``kwargs`` go to the transaction."""
    with shard_set.transaction("overwrite", **kwargs) as tx:
        write_ids(tx.out, ids)
