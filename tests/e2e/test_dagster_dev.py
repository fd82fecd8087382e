"""End to end: launch a materialisation through `dagster dev`'s GraphQL API, then stream the published version."""

from __future__ import annotations

import time

from tests.e2e.conftest import DagsterDev

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
        "selector": {"repositoryLocationName": "pipelines", "repositoryName": "__repository__",
                     "jobName": "daily_conversion"},
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
    return [e.get("error", {}).get("message") or e.get("message", "") for e in events
            if "Failure" in e["__typename"]]


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
    dataset = StreamingDataset(remote=root, local=str(tmp_path / "cache"), version=published)
    ids = sorted(int(dataset[i]["id"]) for i in range(len(dataset)))
    assert ids == list(range(60, 120))  # day 2 of the embedded digits at 60 rows per day
    sample = dataset[0]
    assert sample["pixels"].shape == (64,) and 0 <= int(sample["label"]) <= 9
