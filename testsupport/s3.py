"""A real S3-compatible server for the tests and benchmarks: moto in its own process.

``MotoServer`` runs ``python -m moto.server`` on a free loopback port; it has the emulators' interface too
(``new_root``, ``env``, ``upload_fault``, ``download_fault``, ``object_gets``; testsupport/emulators.py), so
tests/storage/test_stores.py runs its matrix on it. With ``count_requests`` (the
tests' default) clients reach it through a ``FaultProxy`` with no faults, which records every request
the server answered before the client receives the answer: a count read when a client call has
returned is complete. The benchmarks talk to moto directly (``count_requests=False``), so no proxy
in their own process shares the measured time.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from testsupport.fault_proxy import Fault, FaultProxy, Request, free_port


class MotoServer:
    """``moto.server`` in a subprocess on 127.0.0.1 (its output in ``log_dir/moto.log``); ``endpoint`` is
    where clients go: the counting proxy in front of it, or with ``count_requests=False`` moto itself.
    ``python`` runs the server: an interpreter with moto installed (a benchmark's own venv may lack it)."""

    def __init__(self, log_dir: Path, *, count_requests: bool = True, python: str = sys.executable) -> None:
        self.port = free_port()
        self.server_endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / "moto.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_up()
        self._counter = FaultProxy(self.server_endpoint) if count_requests else None
        self.endpoint = self._counter.endpoint if self._counter else self.server_endpoint

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

    def new_root(self) -> str:
        return f"s3://{self.new_bucket()}"

    @staticmethod
    def env(endpoint: str) -> dict[str, str]:
        return s3_env(endpoint)

    @staticmethod
    def upload_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, method="PUT", path=key, **kwargs)

    @staticmethod
    def download_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, path=key, **kwargs)

    @staticmethod
    def object_gets(requests: list[tuple[str, str]], root: str) -> dict[str, int]:
        """``object_gets`` of a proxy's ``requests`` (method, target) under ``root`` (``s3://bucket``)."""
        answered = [Request.answered(method, target, 200) for method, target in requests]
        return object_gets(answered, root.split("://", 1)[1])

    def log_position(self) -> int:
        """How many requests the server has answered so far: pass it to ``requests`` later."""
        return len(self._answered())

    def requests(self, since: int = 0) -> list[Request]:
        """The requests the server answered after the first ``since``, in the order it answered them."""
        return self._answered()[since:]

    def _answered(self) -> list[Request]:
        if self._counter is None:
            raise RuntimeError("this MotoServer does not count requests (it was started with count_requests=False)")
        with self._counter.lock:
            return list(self._counter.forwarded)

    def stop(self) -> None:
        if self._counter is not None:
            self._counter.stop()
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


def delta_options(endpoint: str) -> dict[str, str]:
    """delta-rs's storage options for the test server: plain HTTP, and no locking provider (one writer at a time)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment for clients of the test server (subprocesses included)."""
    return {
        "S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
