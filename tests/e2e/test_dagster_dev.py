"""End to end: launch a materialisation through `dg dev`'s GraphQL API, then stream the published version."""

from __future__ import annotations

import time
from datetime import date

import pytest

from tests.e2e.conftest import DagsterDev

pytestmark = pytest.mark.slow  # a real webserver and its runs: make test-all

DAY = "2026-01-02"

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


def launch_day(dev: DagsterDev, day: str) -> str:
    params = {
        "selector": {
            "repositoryLocationName": "pipelines",
            "repositoryName": "__repository__",
            "jobName": "digits_daily",
        },
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": day}]},
    }
    result = dev.graphql(LAUNCH, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


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
    first = date.fromisoformat(start)
    return [
        i
        for day in sorted(days)
        for i in range(
            (date.fromisoformat(day) - first).days * rows_per_day,
            ((date.fromisoformat(day) - first).days + 1) * rows_per_day,
        )
    ]


def test_graphql_launch_then_stream_the_published_version(dagster_dev: DagsterDev, tmp_path):
    from mds_core import StreamingDataset
    from mds_core.versions import ShardSet

    run_id = launch_day(dagster_dev, DAY)
    status = wait_for(dagster_dev, run_id)
    assert status == "SUCCESS", failure_messages(dagster_dev, run_id)

    root = str(dagster_dev.data_dir / "shard-sets" / "digits")
    shard_set = ShardSet(root)
    published = shard_set.published()
    assert published is not None and published == shard_set.versions()[-1].number
    # Other tests share this instance: the published version holds this day and whatever days it was built on.
    days = sorted(shard_set.version(published).partitions)
    assert DAY in days
    dataset = StreamingDataset(remote=root, local=str(tmp_path / "cache"), version=published)
    ids = sorted(int(dataset[i]["id"]) for i in range(len(dataset)))
    assert ids == day_ids(days)  # 60 rows per day of the embedded digits: day 2 holds ids 60-119
    sample = dataset[0]
    assert sample["pixels"].shape == (64,) and 0 <= int(sample["label"]) <= 9
