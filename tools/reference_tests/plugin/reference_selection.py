"""A pytest plugin for the reference's test suite: keep the public-API tests, record every outcome.

Loaded with ``-p reference_selection``. It deselects what ``reference_rule`` excludes (and what the
reference's own configuration deselects: tests marked ``remote`` or ``daily``), skips collecting a
file none of whose tests count (they import cloud SDKs), and writes ``--reference-report`` (JSON):
each kept test's outcome with its exception's type and first line, each excluded test with why,
and each file that failed to collect.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import reference_rule

UNCONDITIONAL_SKIP = "skipped unconditionally by the reference itself"
DESELECTED_BY_REFERENCE = "marked remote or daily: the reference's own configuration deselects these (network)"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--reference-report", help="where to write the outcomes (JSON)")
    # The reference leaks shared-memory descriptors (about 24 per StreamingDataset): a long run passes the
    # open-files limit, so the runner runs the kept tests in chunks, one process each.
    parser.addoption("--reference-chunk", type=int, default=0, help="run only this chunk of the kept tests")
    parser.addoption("--reference-chunk-size", type=int, default=0, help="tests per chunk; 0: all")


def pytest_configure(config: pytest.Config) -> None:
    for marker in ("world_size(n): ranks of a distributed test", "daily: daily regression", "remote: needs a cloud"):
        config.addinivalue_line("markers", marker)
    config.pluginmanager.register(_Recorder(config), "reference-recorder")


class _Recorder:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reasons: dict[Path, dict[str, str | None]] = {}
        self.excluded: dict[str, str] = {}
        self.outcomes: dict[str, dict[str, str]] = {}
        self.collect_errors: dict[str, str] = {}
        self.kept = 0  # public-API tests collected, before chunking

    def _file_reasons(self, path: Path) -> dict[str, str | None]:
        if path not in self.reasons:
            self.reasons[path] = reference_rule.test_reasons(path)
        return self.reasons[path]

    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if not (collection_path.name.startswith("test_") and collection_path.suffix == ".py"):
            return None
        excluded = reference_rule.wholly_excluded(collection_path)
        if excluded is None:
            return None
        for name, reason in excluded.items():
            self.excluded[f"tests/{collection_path.name}::{name}"] = reason
        return True

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        kept, dropped = [], []
        for item in items:
            reason = self._item_reason(item)
            if reason:
                self.excluded[item.nodeid] = reason
                dropped.append(item)
            else:
                kept.append(item)
        self.kept = len(kept)
        size = config.getoption("--reference-chunk-size")
        if size:
            start = config.getoption("--reference-chunk") * size
            dropped += kept[:start] + kept[start + size :]
            kept = kept[start : start + size]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def _item_reason(self, item: pytest.Item) -> str | None:
        if item.get_closest_marker("remote") or item.get_closest_marker("daily"):
            return DESELECTED_BY_REFERENCE
        if any(not mark.args and "condition" not in mark.kwargs for mark in item.iter_markers("skip")):
            return UNCONDITIONAL_SKIP
        function = item.nodeid.split("::", 1)[1].split("[", 1)[0]
        return self._file_reasons(Path(item.path)).get(function)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid] = _first_line(str(report.longrepr).strip().splitlines()[-1])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is not None and report.failed:
            # user_properties travel from xdist workers to the controller with the report.
            message = _first_line(str(call.excinfo.value))
            report.user_properties.append(("exception", f"{call.excinfo.typename}: {message}"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed"})
        if report.failed and entry["outcome"] in ("passed", "skipped"):  # the first failure is the reason
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["exception"] = dict(report.user_properties).get("exception", "")
            entry["when"] = report.when
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "skipped"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = self.config.getoption("--reference-report")
        if not path or hasattr(self.config, "workerinput"):  # xdist: the controller writes it
            return
        report = {"outcomes": self.outcomes, "excluded": self.excluded, "collect_errors": self.collect_errors}
        report["kept"] = self.kept
        Path(path).write_text(json.dumps(report, indent=1, sort_keys=True))


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
