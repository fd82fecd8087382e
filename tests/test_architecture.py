"""The architecture holds: the import layers (import-linter), small modules, nothing outside the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
MAX_MODULE_LINES = 400


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH first: a copy of the packages in ``cwd`` shadows the installed (editable) ones.
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("mds_core/format/hashing.py", "import mds_core.storage.remote", "Layers"),
        ("mds_core/order/world.py", "import mds_core.format.index", "Layers"),
        ("mds_core/storage/files.py", "import mds_core.streaming.jobdir", "Layers"),
        ("mds_core/streaming/stream.py", "import mds_core.writer", "Reading (streaming, versions)"),
        ("mds_core/convert/table.py", "import mds_core.versions", "Writing (writer, converters)"),
        ("mds_core/versions/manifest.py", "from mds_core import MDSWriter", "through the top-level"),
    ],
)
def test_a_planted_violation_breaks_a_contract(tmp_path: Path, module: str, planted: str, contract: str) -> None:
    for package in ("mds_core", "pipelines"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / module, "a") as source:
        source.write(f"\n{planted}  # planted by the test\n")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(contract in line for line in broken) or contract in result.stdout.split("Contracts:")[0], broken
    assert module[:-3].replace("/", ".") in result.stdout  # the report names the offending module


def _tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def test_no_module_grows_past_one_idea() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _tracked("mds_core", "pipelines")
        if path.suffix == ".py" and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these modules by concern: {long}"


def test_nothing_refers_to_files_outside_the_repository() -> None:
    outside = "../" + "shared"  # spelled in two parts so that this file does not match itself
    spec_dir = "shared/" + "spec"
    hits = [
        str(path.relative_to(ROOT))
        for path in _tracked()
        if path.suffix not in (".mds", ".zstd", ".gz", ".bz2", ".br", ".snappy", ".so")
        and (outside in (text := path.read_text(errors="ignore")) or spec_dir in text)
    ]
    assert not hits, f"these files point outside the repository: {hits}"


def test_every_docs_section_the_code_cites_exists() -> None:
    import re

    cited = set()
    for path in _tracked("mds_core", "pipelines", "tests"):
        if path.suffix == ".py":
            text = " ".join(path.read_text().split())  # citations may wrap across lines
            cited |= set(re.findall(r"docs/([\w-]+\.md)`{0,2},? \"([^\"]+)\"", text))
            cited |= {(page, "") for page in re.findall(r"docs/([\w-]+\.md)", text)}
    assert cited, "the pattern no longer finds the citations"
    for page, section in sorted(cited):
        doc = ROOT / "docs" / page
        assert doc.exists(), f"code cites docs/{page}, which does not exist"
        headings = [line.lstrip("#").strip() for line in doc.read_text().splitlines() if line.startswith("#")]
        assert not section or section in headings, f"code cites section {section!r} of docs/{page}: {headings}"
