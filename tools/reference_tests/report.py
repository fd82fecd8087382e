"""Count the two runs against each other and group every failure by its reason.

The public-API tests are those the baseline run kept (the same rule selects on both sides; the
baseline's list is the reference, so a test file that fails to collect against mds_core still
counts its tests, as failures). A failure's reason comes from ``reasons.KNOWN`` (the differences
docs/differences.md lists); one that matches no entry is grouped by its exception and flagged.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from reasons import KNOWN

UNEXPLAINED = "UNEXPLAINED (add it to tools/reference_tests/reasons.py and docs/differences.md): "


@dataclass
class Summary:
    """What ``make reference-tests`` prints, and what ``tests/test_reference_suite.py`` checks."""

    total: int
    baseline_passed: int
    ours_passed: int
    excluded: dict[str, int]  # reason -> tests, most first
    ours_failures: dict[str, list[str]] = field(default_factory=dict)  # reason -> test ids
    baseline_failures: dict[str, list[str]] = field(default_factory=dict)

    @property
    def unexplained(self) -> int:
        return sum(len(ids) for reason, ids in self.ours_failures.items() if reason.startswith(UNEXPLAINED))


def summarize(baseline: dict[str, Any], ours: dict[str, Any]) -> Summary:
    public = sorted(baseline["outcomes"])
    summary = Summary(
        total=len(public),
        baseline_passed=sum(_passed(baseline, test) for test in public),
        ours_passed=sum(_passed(ours, test) for test in public),
        excluded=dict(Counter(baseline["excluded"].values()).most_common()),
    )
    summary.ours_failures = _group(ours, [test for test in public if not _passed(ours, test)], known=True)
    summary.baseline_failures = _group(baseline, [test for test in public if not _passed(baseline, test)])
    return summary


def _passed(report: dict[str, Any], test: str) -> bool:
    return report["outcomes"].get(test, {}).get("outcome") == "passed"


def _group(report: dict[str, Any], failed: list[str], known: bool = False) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for test in failed:
        groups[_reason(report, test, known)].append(test)
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))


def _reason(report: dict[str, Any], test: str, known: bool) -> str:
    if known:
        for pattern, reason in KNOWN:
            if re.search(pattern, test):
                return reason
    outcome = report["outcomes"].get(test)
    if outcome is None:
        errors = [error for module, error in report["collect_errors"].items() if test.startswith(module)]
        detail = f"its file did not collect: {errors[0]}" if errors else "not run"
    else:
        detail = f"{outcome['outcome']}: {outcome.get('exception') or '(no exception recorded)'}"
    return (UNEXPLAINED if known else "") + detail


def render(summary: Summary, verbose: bool = False) -> str:
    lines = [
        f"The reference's tests (mosaicml-streaming 0.13.0 sdist): {summary.total} public-API tests",
        f"  baseline, the reference itself (benchmarks/.venv): {summary.baseline_passed} of {summary.total} pass",
        f"  ours, mds_core through the shim (.venv):          {summary.ours_passed} of {summary.total} pass",
        f"  excluded by the rule (tools/reference_tests/README.md): {sum(summary.excluded.values())}",
    ]
    lines += [f"    {count:4d}  {reason}" for reason, count in summary.excluded.items()]
    for title, groups in (("ours", summary.ours_failures), ("the reference's own", summary.baseline_failures)):
        failed = sum(map(len, groups.values()))
        lines += ["", f"Failures, {title} ({failed}), by reason:"]
        for reason, tests in groups.items():
            lines.append(f"  [{len(tests)}] {reason}")
            shown = tests if verbose else _collapse(tests)
            lines += [f"        {test}" for test in shown]
    return "\n".join(lines)


def _collapse(tests: list[str]) -> list[str]:
    """One line per test function: its parametrized cases counted, not listed."""
    cases = Counter(test.split("[", 1)[0] for test in tests)
    first = {test.split("[", 1)[0]: test for test in reversed(tests)}
    return [first[name] if count == 1 else f"{name}[...] ({count} cases)" for name, count in cases.items()]
