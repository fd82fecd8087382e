"""The golden-fixture generators (tools/golden) reproduce tests/fixtures with the reference, on a subset.

`make fixtures` checks every fixture; this runs the same check on a few dataset cases (partitions merged
with merge_index, a compressed case, samples made by code, a pkl column) and the first cases of each
order file, in the reference's environment (benchmarks/.venv).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REF_PYTHON = ROOT / "benchmarks" / ".venv" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not REF_PYTHON.exists(), reason="needs the reference: run `make bench-env`")
def test_the_generators_reproduce_a_subset_of_the_fixtures(tmp_path: Path) -> None:
    command = [str(REF_PYTHON), "-m", "tools.golden", "check", "--out", str(tmp_path / "golden")]
    command += ["--cases", "merged,mixed_gz,pkl_unsafe", "--order-cases", "2"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK: every file reproduces" in result.stdout
    assert "order-golden/resume.json" in result.stdout  # compared, as JSON (a subset of the cases)
