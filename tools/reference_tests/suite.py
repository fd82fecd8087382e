"""Prepare and run the reference's test suite: the sdist, the pytest both sides use, one run per side.

The reference's tests come from its sdist on PyPI (never committed here). Both sides run them with
the pytest version the reference pins for its own tests (8.4.1: pytest 9 refuses marks on
fixtures, which ``test_mixing.py`` has), installed once into ``.cache/reference_tests/pytest-site``
and put first on ``PYTHONPATH``, with plugin auto-loading off so both sides load the same plugins.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "plugin"))  # the rule, which the pytest plugin applies too

import reference_rule  # noqa: E402

CACHE = ROOT / ".cache" / "reference_tests"

VERSION = "0.13.0"
SDIST = CACHE / f"mosaicml_streaming-{VERSION}.tar.gz"
SDIST_SHA256 = "09819e2582c771cda53f4b5518e3968d0240756e58e91cdbd8a46edbc89c831c"
PYTEST_PINS = ("pytest==8.4.1", "pytest-timeout==2.4.0")
PYTEST_SITE = CACHE / "pytest-site"
TEST_TIMEOUT_S = 300  # per test; a hang fails that test instead of the run
CHUNK_SIZE = 60  # tests per process: the reference leaks shared-memory descriptors (see the plugin)


class SuiteError(RuntimeError):
    """The suite could not be prepared or run (no network for the sdist, a missing environment)."""


@dataclass(frozen=True)
class Side:
    """One run of the suite: which Python, and what goes on its path before its site-packages."""

    name: str
    python: Path
    extra_path: tuple[Path, ...]


BASELINE = Side("baseline", ROOT / "benchmarks" / ".venv" / "bin" / "python", ())
OURS = Side("ours", ROOT / ".venv" / "bin" / "python", (HERE / "shim",))


@contextmanager
def exclusive() -> Iterator[None]:
    """One run at a time: two would share (and delete) each other's trees under the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "run.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another reference-tests run to finish ({CACHE / 'run.lock'})", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch_sdist() -> Path:
    """The reference's sdist, downloaded once with pip into the cache; its digest is checked every time."""
    if not SDIST.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", f"mosaicml-streaming=={VERSION}"]
        command += ["--no-binary", ":all:", "--no-deps", "--quiet", "-d", str(CACHE)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode or not SDIST.exists():
            raise SuiteError(
                f"could not download the reference's sdist (mosaicml-streaming=={VERSION}) from PyPI into "
                f"{CACHE}; is the network up? pip said:\n{result.stderr.strip()[-2000:]}"
            )
    digest = hashlib.sha256(SDIST.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SuiteError(f"{SDIST} has sha256 {digest}, not PyPI's {SDIST_SHA256}: delete it and run again")
    return SDIST


def install_pytest() -> Path:
    """The pinned pytest, once, into a folder both environments put on their path (pure Python)."""
    stamp = PYTEST_SITE / ".pins"
    if stamp.exists() and stamp.read_text() == " ".join(PYTEST_PINS):
        return PYTEST_SITE
    shutil.rmtree(PYTEST_SITE, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(PYTEST_SITE), *PYTEST_PINS]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SuiteError(f"could not install {' '.join(PYTEST_PINS)} into {PYTEST_SITE}:\n{result.stderr[-2000:]}")
    stamp.write_text(" ".join(PYTEST_PINS))
    return PYTEST_SITE


def prepare_tree(side: Side) -> Path:
    """A fresh copy of the sdist's ``tests/`` with our helpers (``tests.common``, ``conftest.py``) beside them."""
    tree = CACHE / f"work-{side.name}"
    shutil.rmtree(tree, ignore_errors=True)
    (tree / "tmp").mkdir(parents=True)
    prefix = f"mosaicml_streaming-{VERSION}/tests/"
    with tarfile.open(fetch_sdist()) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                target = tree / "tests" / member.name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                assert source is not None  # a regular file
                target.write_bytes(source.read())
    shutil.copytree(HERE / "support" / "tests", tree / "tests", dirs_exist_ok=True)
    (tree / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return tree


def run_side(side: Side, pytest_args: list[str]) -> dict[str, Any]:
    """Run the suite on one side, file by file and in chunks (one process each); the merged report."""
    if not side.python.exists():
        raise SuiteError(f"{side.python} is missing: run `make install bench-env` first")
    tree = prepare_tree(side)
    merged: dict[str, Any] = {"outcomes": {}, "excluded": {}, "collect_errors": {}}
    for test_file in sorted((tree / "tests").glob("test_*.py")):
        # pytest does not ask plugins whether to skip a file named on its command line: the runner asks.
        excluded = reference_rule.wholly_excluded(test_file)
        if excluded is not None:
            merged["excluded"].update({f"tests/{test_file.name}::{name}": why for name, why in excluded.items()})
            continue
        chunk = 0
        while True:
            report = _run_chunk(side, tree, test_file, chunk, pytest_args)
            for key in merged:
                merged[key].update(report[key])
            chunk += 1
            if chunk * CHUNK_SIZE >= report["kept"]:
                break
    return merged


def _run_chunk(side: Side, tree: Path, test_file: Path, chunk: int, pytest_args: list[str]) -> dict[str, Any]:
    report = tree / "report.json"
    report.unlink(missing_ok=True)
    path = [install_pytest(), HERE / "plugin", *side.extra_path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, path)), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    # Each side gets its own temporary directory: some tests derive fixed paths from it.
    env["TMPDIR"] = str(tree / "tmp")
    command = [str(side.python), "-m", "pytest", "-p", "pytest_timeout", "-p", "reference_selection", "-q", "-rfE"]
    command += [f"--reference-report={report}", f"--timeout={TEST_TIMEOUT_S}"]
    command += [f"--reference-chunk={chunk}", f"--reference-chunk-size={CHUNK_SIZE}", *pytest_args]
    command.append(str(test_file.relative_to(tree)))
    with (tree / "pytest.log").open("ab") as log:
        code = subprocess.run(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if not report.exists():
        raise SuiteError(
            f"the {side.name} run of {test_file.name} (exit {code}) wrote no report; see {tree}/pytest.log"
        )
    return json.loads(report.read_text())


def run_sides(sides: list[Side], pytest_args: list[str]) -> dict[str, dict[str, Any]]:
    """Run the sides at once, one process each at a time; each one's merged report."""
    fetch_sdist()  # once, before the sides share it
    install_pytest()
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {side.name: pool.submit(run_side, side, pytest_args) for side in sides}
        return {name: future.result() for name, future in futures.items()}
