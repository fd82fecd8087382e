"""The code location as a team deploys it: a non-editable wheel with the code server's extra, in a fresh
virtual environment, run from a folder that is not the checkout.

The package's own dataset components and instance settings are used (nothing from the checkout); the data goes to
the user's data folder (``XDG_DATA_HOME`` here, as platformdirs reads it), never into the installation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh environment (about a minute of installs) and a Spark run

ROOT = Path(__file__).resolve().parents[2]
# The `demo` extra's packages, which a code server does not need.
DEMO_ONLY = ("dagster_webserver", "dagster_dg_cli", "sklearn", "matplotlib")
DAY = "2026-03-01"


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command[:4]} exited with {done.returncode}:\n{output[-4000:]}"
    return output


def installed_files(site_packages: Path) -> set[str]:
    """Every file of the environment's packages but Python's bytecode caches."""
    return {str(p.relative_to(site_packages)) for p in site_packages.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, a fresh environment with it and the `dagster` extra installed)."""
    base = tmp_path_factory.mktemp("wheel")
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(base), str(ROOT)],
        ROOT,
    )
    [wheel] = base.glob("mds_pipelines-*.whl")
    env = base / "env"
    run([sys.executable, "-m", "venv", str(env)], base)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    run([*pip, "torch==2.13.0"], base)  # the CPU build from local disk first, as the README says
    run([*pip, f"{wheel}[dagster]", "-c", str(ROOT / "constraints.txt")], base)
    return wheel, env


def test_the_wheel_ships_the_packages_data(wheel_env: tuple[Path, Path]) -> None:
    wheel, _ = wheel_env
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"pipelines/dagster.yaml", "pipelines/log4j2.properties"} <= names
    # the dataset components, loaded from the package
    assert {"pipelines/defs/digits/defs.yaml", "pipelines/defs/synthetic/defs.yaml"} <= names
    assert {"pipelines/py.typed", "mds_core/py.typed"} <= names
    assert not any(name.startswith(("tests/", "benchmarks/", "examples/")) for name in names)
    packaged = zipfile.ZipFile(wheel).read("pipelines/dagster.yaml").decode()
    assert packaged == (ROOT / "pipelines" / "dagster.yaml").read_text()


def test_an_installed_code_location_materialises_and_publishes_a_day_outside_the_installation(
    wheel_env: tuple[Path, Path], tmp_path: Path
) -> None:
    _, env = wheel_env
    python, dagster = str(env / "bin" / "python"), str(env / "bin" / "dagster")
    [site_packages] = (env / "lib").glob("python3.*/site-packages")
    before = installed_files(site_packages)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    variables = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "user"),
        "XDG_DATA_HOME": str(tmp_path / "user-data"),
        "DAGSTER_HOME": str(tmp_path / "dagster-home"),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "MDS_SPARK_MASTER": "local[1]",
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "S3_ENDPOINT_URL")},
    }
    find_demo_only = f"import importlib.util as u; print([m for m in {DEMO_ONLY!r} if u.find_spec(m)])"
    present = run([python, "-c", find_demo_only], elsewhere, variables)
    assert present.strip() == "[]"  # the code server's extra leaves the demo's packages out

    run([python, "-m", "pipelines.instance", variables["DAGSTER_HOME"]], elsewhere, variables)
    assert (tmp_path / "dagster-home" / "dagster.yaml").read_text() == (
        site_packages / "pipelines" / "dagster.yaml"
    ).read_text()
    run([dagster, "definitions", "validate", "-m", "pipelines.definitions"], elsewhere, variables)
    tags = json.dumps({"dagster/partition": DAY})
    execute = [dagster, "job", "execute", "-m", "pipelines.definitions", "-j", "synthetic_daily", "--tags", tags]
    log = run(execute, elsewhere, variables)
    assert "RUN_SUCCESS" in log

    data = tmp_path / "user-data" / "mds-pipelines"
    show = (
        f"from mds_core.versions import ShardSet; s = ShardSet({str(data / 'shard-sets' / 'synthetic')!r}); "
        "print(s.published(), s.versions()[-1].rows, s.versions()[-1].lineage['days'])"
    )
    published = run([python, "-c", show], elsewhere, variables)
    assert published.split() == ["1", "2000", f"['{DAY}']"]
    assert sorted(p.name for p in data.iterdir()) == ["cache", "shard-sets", "warehouse"]
    assert installed_files(site_packages) == before  # nothing written into the installation
    assert sorted(p.name for p in elsewhere.iterdir()) == []  # nor into the folder it ran from

    error = subprocess.run(
        [python, "-c", "from pipelines.assets.raw import digits_day; digits_day(None, '2026-01-01', 0, 1)"],
        cwd=elsewhere,
        env=variables,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert error.returncode == 1
    assert error.stderr.strip().splitlines()[-1] == (
        "mds_core.errors.MissingDependencyError: the digits source reads scikit-learn's embedded digits: "
        "pip install 'mds-pipelines[demo]'"
    )
