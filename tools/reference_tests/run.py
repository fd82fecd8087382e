"""Run the reference's own tests against the reference (the baseline) and against mds_core; print both counts.

    .venv/bin/python tools/reference_tests/run.py [--json FILE] [--verbose] [--fresh-baseline]

``make reference-tests`` runs this. The baseline's report is kept in ``tools/reference_tests/baseline.json``,
keyed by everything that decides it (the sdist, our helpers, the rule, the pinned pytest), so a run
only runs mds_core's side unless one of those changed (or ``--fresh-baseline``). Exits 1 when a failure against mds_core has no known reason
(``reasons.py``), 2 when the suite could not run (no network for the sdist, no environment).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import suite
from report import render, summarize


def baseline_key() -> str:
    """A digest of every input of the baseline run but the reference itself (pinned by setup_env.sh)."""
    digest = hashlib.sha256(suite.fetch_sdist().read_bytes())
    digest.update(" ".join(suite.PYTEST_PINS).encode())
    for folder in ("support", "plugin"):
        for path in sorted((suite.HERE / folder).rglob("*.py")):
            digest.update(path.relative_to(suite.HERE).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


# The reference's own report, kept in the repository: running the reference takes half an hour on two
# cores, and its result changes only with what baseline_key() digests. `--fresh-baseline` remeasures it.
BASELINE_REPORT = suite.HERE / "baseline.json"


def run(fresh_baseline: bool) -> tuple[dict, dict]:
    with suite.exclusive():
        return _run(fresh_baseline)


def _run(fresh_baseline: bool) -> tuple[dict, dict]:
    key = baseline_key()
    if BASELINE_REPORT.exists() and not fresh_baseline:
        kept = json.loads(BASELINE_REPORT.read_text())
        if kept.get("key") == key:
            return kept["report"], suite.run_sides([suite.OURS], [])["ours"]
    reports = suite.run_sides([suite.BASELINE, suite.OURS], [])
    BASELINE_REPORT.write_text(json.dumps({"key": key, "report": reports["baseline"]}, indent=0, sort_keys=True) + "\n")
    return reports["baseline"], reports["ours"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the counts and failures here")
    parser.add_argument("--verbose", action="store_true", help="list every parametrized case")
    parser.add_argument("--fresh-baseline", action="store_true", help="rerun the reference too")
    args = parser.parse_args(argv)
    try:
        baseline, ours = run(args.fresh_baseline)
    except suite.SuiteError as err:
        print(f"reference-tests: {err}", file=sys.stderr)
        return 2
    summary = summarize(baseline, ours)
    print(render(summary, verbose=args.verbose))
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(summary), indent=1))
    if summary.unexplained:
        print(f"\n{summary.unexplained} failure(s) against mds_core have no known reason", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
