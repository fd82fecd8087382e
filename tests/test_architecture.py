"""The architecture holds: the import layers (import-linter), small modules, nothing outside the repository."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60  # the ``def`` line to the end of the body, without decorators and the docstring


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH first: a copy of the packages in ``cwd`` shadows the installed (editable) ones.
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 6 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("mds_core/format/hashing.py", "import mds_core.storage.remote", "Layers"),
        ("mds_core/order/world.py", "import mds_core.format.index", "Layers"),
        ("mds_core/storage/files.py", "import mds_core.streaming.jobdir", "Layers"),
        ("mds_core/streaming/stream.py", "import mds_core.writer", "Reading (streaming, versions)"),
        ("mds_core/convert/table.py", "import mds_core.versions", "Writing (writer, converters)"),
        ("mds_core/versions/manifest.py", "from mds_core import MDSWriter", "through the top-level"),
        ("mds_core/versions/transaction.py", "import mds_core.versions.shard_set", "No import circles"),
        ("mds_core/storage/files.py", "import mds_core.storage.remote", "No import circles"),
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
    # The report names the offending module: in full, or (for a circle) relative to its package.
    named = module[:-3].replace("/", ".")
    package, name = named.rsplit(".", 1)
    assert named in result.stdout or (f"in {package}." in result.stdout and f".{name} " in result.stdout)


def _tracked(*patterns: str) -> list[Path]:
    command = ["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns]
    listed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def test_no_module_grows_past_one_idea() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _tracked("mds_core", "pipelines")
        if path.suffix == ".py" and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these modules by concern: {long}"


def _long_functions(path: Path, root: Path) -> list[str]:
    """``file:line name (length)`` for every function or method in ``path`` longer than ``MAX_FUNCTION_LINES``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # ``lineno`` is the ``def`` line (decorators come before it); ``end_lineno`` the body's last line.
            length = (node.end_lineno or node.lineno) - node.lineno + 1 - _docstring_lines(node)
            if length > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The docstring's lines: an ``Args:`` section documents a function, it does not lengthen its logic."""
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def test_no_function_grows_past_a_screen() -> None:
    long = [
        hit for path in _tracked("mds_core", "pipelines") if path.suffix == ".py" for hit in _long_functions(path, ROOT)
    ]
    print("\n".join(long))
    assert not long, f"split these functions into named steps (at most {MAX_FUNCTION_LINES} lines):\n" + "\n".join(long)


def test_a_planted_long_function_is_reported(tmp_path: Path) -> None:
    statements = [f"x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1)]
    fits = ["@decorated", "def fits():", '    """Its docstring does not count,', '    nor its decorator."""']
    fits += [f"    {line}" for line in statements]  # exactly MAX_FUNCTION_LINES long
    too_long = ["class Holder:", "    def too_long(self):", '        """A method one line longer."""', "        pass"]
    too_long += [f"        {line}" for line in statements]
    (tmp_path / "planted.py").write_text("\n".join([*fits, "", *too_long]) + "\n")
    first_line = len(fits) + 3  # the blank line and ``class Holder:`` come before the ``def``
    expected = f"planted.py:{first_line} too_long ({MAX_FUNCTION_LINES + 1} lines)"
    assert _long_functions(tmp_path / "planted.py", tmp_path) == [expected]


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


def _test_imports(path: Path, root: Path) -> list[str]:
    """``file:line`` of every import of the ``tests`` package or a module in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_benchmarks_and_the_support_package_import_no_test_module() -> None:
    """The loopback servers and shared harness live in testsupport/, which tests and benchmarks both import."""
    modules = [path for path in _tracked("benchmarks", "testsupport") if path.suffix == ".py"]
    assert {"bench_daily_cost.py", "daily_cost.py", "s3.py"} <= {path.name for path in modules}
    hits = [hit for path in modules for hit in _test_imports(path, ROOT)]
    assert not hits, f"these import the test suite; move what they need to testsupport/: {hits}"


def test_a_planted_test_import_is_reported(tmp_path: Path) -> None:
    lines = ["import os", "from tests.s3 import MotoServer", "import tests.clients", "from testsupport.s3 import x"]
    (tmp_path / "bench.py").write_text("\n".join(lines) + "\n")
    assert _test_imports(tmp_path / "bench.py", tmp_path) == ["bench.py:2", "bench.py:3"]
