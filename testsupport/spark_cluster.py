"""A real Spark standalone cluster on 127.0.0.1, from pyspark's own distribution (tests and benchmarks).

``StandaloneCluster`` starts a master and ``workers`` workers, each its own JVM
(``<pyspark>/bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}``), each worker with
its own ``--work-dir`` (where its executors run: ``<work-dir>/<app-id>/<executor-id>``) and its own
``SPARK_LOCAL_DIRS`` (the executors' ``spark.local.dir``), in a fresh process group so ``stop()`` ends
the worker and the executors it launched together. The daemons get a clean environment: no
``PYTHONPATH``, no storage credentials, so an executor sees only what the driver's application gives it
(``spark.executorEnv.*``, ``spark.submit.pyFiles``, ``spark.pyspark.python``).

``hidden``: a directory that the workers and their executors see as an empty, private tmpfs (a mount
namespace of their own, ``unshare --mount``), while the driver sees the real directory: a path that
exists only on the driver's disk, as ``/tmp`` on a laptop is for a real cluster's executors.

``executor_python`` makes a Python for the executors WITHOUT mds_core: a venv whose site-packages names
the project venv's site-packages in a ``.pth`` (numpy, pyarrow, s3fs, ...), whose editable install of
this project is not processed there; ``package_zip`` zips ``mds_core`` for ``spark.submit.pyFiles``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path
from typing import Any

from testsupport.fault_proxy import free_port

ROOT = Path(__file__).resolve().parent.parent


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _hide_prefix(hidden: Path) -> list[str] | None:
    """The command prefix that runs a program with a private tmpfs over ``hidden``, if this machine allows it."""
    if shutil.which("unshare") is None:
        return None
    script = 'mount -t tmpfs mds-executor-disk "$0" && exec "$@"'
    for flags in (["--mount", "--propagation", "private"], ["--user", "--map-root-user", "--mount"]):
        probe = subprocess.run(
            ["unshare", *flags, "sh", "-c", script, str(hidden), "true"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return ["unshare", *flags, "sh", "-c", script, str(hidden)]
    return None


class StandaloneCluster:
    def __init__(
        self,
        root: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        hidden: Path | None = None,
        timeout: float = 180.0,
    ) -> None:
        self.root = Path(root)
        self.home = spark_home()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.port, self.web_port = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.web_url = f"http://127.0.0.1:{self.web_port}"
        self.worker_dirs: list[Path] = []
        self.local_dirs: list[Path] = []
        self.hidden = None
        prefix: list[str] = []
        if hidden is not None:
            hidden.mkdir(parents=True, exist_ok=True)
            found = _hide_prefix(hidden)
            if found is not None:
                self.hidden, prefix = hidden, found
        try:
            ports = ["--port", str(self.port), "--webui-port", str(self.web_port)]
            self._start("master", [], ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", *ports], {})
            for index in range(workers):
                work, local = self.root / f"worker-{index}" / "work", self.root / f"worker-{index}" / "local"
                work.mkdir(parents=True, exist_ok=True)
                local.mkdir(parents=True, exist_ok=True)
                self.worker_dirs.append(work)
                self.local_dirs.append(local)
                worker = ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1"]
                sizes = ["--cores", str(cores), "--memory", memory, "--webui-port", str(free_port())]
                env = {"SPARK_WORKER_DIR": str(work), "SPARK_LOCAL_DIRS": str(local)}
                self._start(f"worker-{index}", prefix, [*worker, *sizes, "--work-dir", str(work)], env)
            self._wait_for_workers(workers, timeout)
        except BaseException:
            self.stop()
            raise

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "JAVA_HOME", "TMPDIR", "USER")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        env.update(SPARK_HOME=str(self.home), SPARK_LOG_DIR=str(self.root / "logs"), SPARK_NO_DAEMONIZE="1")
        return {**env, "SPARK_DAEMON_MEMORY": "512m", **extra}

    def _start(self, name: str, prefix: list[str], args: list[str], env: dict[str, str]) -> None:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.root / "logs" / f"{name}.log", "wb") as log:
            self.processes.append(
                subprocess.Popen(
                    [*prefix, str(self.home / "bin" / "spark-class"), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self._env(env),
                    cwd=self.root,
                    start_new_session=True,
                )
            )

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as answer:
            return json.load(answer)

    def _wait_for_workers(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"a Spark daemon exited ({process.args!r}); logs in {self.root / 'logs'}:\n"
                        + self.logs()[-4000:]
                    )
            try:
                if self.state().get("aliveworkers", 0) >= count:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{count} Spark workers did not register within {timeout:g} s:\n{self.logs()[-4000:]}")

    def logs(self) -> str:
        return "".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}" for p in sorted((self.root / "logs").glob("*.log"))
        )

    def executor_dirs(self) -> dict[int, list[Path]]:
        """worker index -> the executor directories its work dir holds (``<app-id>/<executor-id>``)."""
        return {i: sorted(p for p in work.glob("app-*/*") if p.is_dir()) for i, work in enumerate(self.worker_dirs)}

    def worker_view(self, path: Path) -> Path:
        """``path`` as the workers see it (through a worker's mount namespace when ``hidden`` is in use)."""
        worker = self.processes[1]
        return Path(f"/proc/{worker.pid}/root") / Path(path).relative_to("/")

    def stop(self) -> None:
        for process in reversed(self.processes):  # workers (and their executors) first, the master last
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for process in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group: executors, Python workers
        self.processes = []


def executor_python(root: Path) -> str:
    """A Python for the executors that has the project's dependencies but not mds_core (see the module doc)."""
    target = Path(root) / "executor-venv"
    if not (target / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
        import sysconfig

        site = Path(sysconfig.get_paths()["purelib"])  # the project venv's site-packages
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        (target / "lib" / version / "site-packages" / "project-dependencies.pth").write_text(f"{site}\n")
    python = str(target / "bin" / "python")
    found = subprocess.run([python, "-c", "import mds_core"], cwd=root, capture_output=True, check=False)
    if found.returncode == 0:
        raise RuntimeError(f"{python} can import mds_core; the executors' Python must not")
    return python


def package_zip(root: Path) -> str:
    """``mds_core`` (its Python files) as a zip for ``spark.submit.pyFiles``: what ``--py-files`` ships."""
    target = Path(root) / "mds_core.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((ROOT / "mds_core").rglob("*")):
            if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(ROOT).as_posix())
    return str(target)
