"""GraphQL as the Dagster UI speaks it: launch a run, wait for it, read its events and metadata."""

from __future__ import annotations

import json
import time
from datetime import date
from typing import Any

from tests.e2e.conftest import DagsterDev

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message stack }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}
"""

STATUS = """
query Status($runId: ID!) {
  runOrError(runId: $runId) { __typename ... on Run { status } }
}
"""

FAILURE_LOGS = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) { ... on EventConnection { events { __typename
    ... on MessageEvent { message } ... on ExecutionStepFailureEvent { error { message } } } } }
}
"""


def wait_for(dev: DagsterDev, run_id: str, timeout: float = 420.0) -> str:
    deadline = time.monotonic() + timeout
    status = "QUEUED"
    while time.monotonic() < deadline:
        status = dev.graphql(STATUS, {"runId": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(2)
    raise AssertionError(f"run {run_id} still {status} after {timeout:.0f} s")


def failure_messages(dev: DagsterDev, run_id: str) -> list[str]:
    events = dev.graphql(FAILURE_LOGS, {"runId": run_id})["logsForRun"]["events"]
    return [e.get("error", {}).get("message") or e.get("message", "") for e in events if "Failure" in e["__typename"]]


def day_ids(days: list[str], rows_per_day: int = 60, start: str = "2026-01-01") -> list[int]:
    """The digits ids the given days hold (the registry's start date, the fixture's rows per day)."""
    offsets = sorted((date.fromisoformat(day) - date.fromisoformat(start)).days for day in days)
    return [offset * rows_per_day + i for offset in offsets for i in range(rows_per_day)]


REPOSITORY = {"repositoryLocationName": "pipelines", "repositoryName": "__repository__"}
SHARD_SET_KEY = {"path": ["digits", "shard_set"]}

EVENTS = """
query Events($runId: ID!, $cursor: String) {
  logsForRun(runId: $runId, afterCursor: $cursor) { __typename
    ... on EventConnection { cursor hasMore events { __typename
      ... on MessageEvent { message }
      ... on MaterializationEvent { assetKey { path } metadataEntries { ...Entry } }
      ... on AssetCheckEvaluationEvent { evaluation { checkName success partition assetKey { path }
                                                      metadataEntries { ...Entry } } } } } }
}
fragment Entry on MetadataEntry { label
  ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
  ... on TextMetadataEntry { text } ... on JsonMetadataEntry { jsonString } ... on BoolMetadataEntry { boolValue } }
"""


def launch(
    dev: DagsterDev,
    job: str,
    tags: dict[str, str] | None = None,
    run_config: dict | None = None,
    checks: list[dict] | None = None,
) -> str:
    """launchRun as the UI sends it; ``checks`` selects asset checks only (a check's "Execute" button)."""
    selector: dict[str, Any] = {**REPOSITORY, "jobName": job}
    if checks is not None:
        selector.update(assetSelection=[], assetCheckSelection=checks)
    params = {
        "selector": selector,
        "runConfigData": run_config or {},
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
    }
    result = dev.graphql(LAUNCH, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def run_events(dev: DagsterDev, run_id: str) -> list[dict]:
    events, cursor = [], None
    while True:
        page = dev.graphql(EVENTS, {"runId": run_id, "cursor": cursor})["logsForRun"]
        events += page["events"]
        if not page["hasMore"]:
            return events
        cursor = page["cursor"]


def entry_value(entry: dict) -> Any:
    """A metadata entry's value: its JSON parsed, or whichever of the Entry fragment's value fields it has."""
    if "jsonString" in entry:
        return json.loads(entry["jsonString"])
    return next((entry[k] for k in ("intValue", "floatValue", "text", "boolValue") if k in entry), None)


def entries(metadata: list[dict]) -> dict[str, Any]:
    return {entry["label"]: entry_value(entry) for entry in metadata}
