"""Day-to-day operations through the real webserver (`dg dev`, GraphQL), as a person does them in the UI.

One ordered history, launched once for the module (each run starts a Spark JVM): a day whose smoke test
fails, the next day, the failed day again, a day replaced, a rollback from the publish job, the smoke
check executed on its own, and a second dataset. The tests below assert on what each step left, in
the runs' metadata and in the shard sets themselves. Other tests share the `dg dev` instance, so the
history starts from whatever digits versions exist (test_dagster_dev.py publishes day 2026-01-02) and
uses days nobody else touches; every number asserted is exact, relative to that starting point.

The UI must never show a secret: `dg dev` runs with a secret in $MDS_SPARK_CONF, and no GraphQL answer
(resources, the Launchpad's defaults, runs' config and events) contains it, while the runs that used it
worked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.e2e.conftest import SECRET, DagsterDev
from tests.e2e.test_dagster_dev import LAUNCH, day_ids, failure_messages, wait_for

pytestmark = pytest.mark.slow  # a real webserver and its runs: make test-all

FAILED_DAY, NEXT_DAY = "2026-01-05", "2026-01-06"  # days no other e2e test runs
SYNTHETIC_DAY = "2026-01-05"
FAILING_SMOKE = {"resources": {"smoke_settings": {"config": {"min_rows_per_second": 1e12}}}}
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


def entries(metadata: list[dict]) -> dict[str, Any]:
    values = {}
    for entry in metadata:
        if "jsonString" in entry:
            values[entry["label"]] = json.loads(entry["jsonString"])
        else:
            values[entry["label"]] = next(
                (entry[k] for k in ("intValue", "floatValue", "text", "boolValue") if k in entry), None
            )
    return values


@dataclass
class Run:
    run_id: str
    status: str
    events: list[dict]
    published_after: int | None  # the digits shard set's published version once the run had finished
    failures: list[str] = field(default_factory=list)

    def materialized(self, asset: str, dataset: str = "digits") -> dict[str, Any] | None:
        found = [
            e
            for e in self.events
            if e["__typename"] == "MaterializationEvent" and e["assetKey"]["path"] == [dataset, asset]
        ]
        assert len(found) <= 1, found
        return entries(found[0]["metadataEntries"]) if found else None

    def check(self, name: str) -> dict[str, Any]:
        [evaluation] = [
            e["evaluation"]
            for e in self.events
            if e["__typename"] == "AssetCheckEvaluationEvent" and e["evaluation"]["checkName"] == name
        ]
        return {**evaluation, "metadata": entries(evaluation["metadataEntries"])}


@dataclass
class History:
    dev: DagsterDev
    start_latest: int  # the digits set's newest version before the history (0: none)
    start_published: int | None
    start_days: list[str]  # the days the published version held
    runs: dict[str, Run]
    digits_before_synthetic: tuple[list[int], int | None]  # digits' versions and published one then

    def v(self, step: int) -> int:
        """The number of the history's ``step``-th new digits version (1-based)."""
        return self.start_latest + step


def shard_set(dev: DagsterDev, dataset: str = "digits"):
    from mds_core.versions import ShardSet

    return ShardSet(str(dev.data_dir / "shard-sets" / dataset))


def versions_of(dev: DagsterDev, dataset: str) -> list[int]:
    root = dev.data_dir / "shard-sets" / dataset
    return [v.number for v in shard_set(dev, dataset).versions()] if root.exists() else []


def published(dev: DagsterDev) -> int | None:
    return shard_set(dev).published() if (dev.data_dir / "shard-sets" / "digits").exists() else None


@pytest.fixture(scope="module")
def history(dagster_dev: DagsterDev) -> History:
    dev = dagster_dev
    start_versions = versions_of(dev, "digits")
    start_published = published(dev)
    start_days = sorted(shard_set(dev).version(start_published).partitions) if start_published is not None else []
    steps = [
        ("failed", "digits_daily", {"dagster/partition": FAILED_DAY}, FAILING_SMOKE, None),
        ("next_day", "digits_daily", {"dagster/partition": NEXT_DAY}, None, None),
        ("rerun", "digits_daily", {"dagster/partition": FAILED_DAY}, None, None),
        ("replace", "digits_daily", {"dagster/partition": NEXT_DAY}, None, None),
        ("rollback", "digits_publish", {}, None, None),  # the Launchpad's default config: roll back
        (
            "check_alone",
            "__ASSET_JOB",
            {"dagster/partition": NEXT_DAY},
            None,
            [{"assetKey": SHARD_SET_KEY, "name": "loader_smoke_test"}],
        ),
        ("synthetic", "synthetic_daily", {"dagster/partition": SYNTHETIC_DAY}, None, None),
    ]
    runs: dict[str, Run] = {}
    digits_before_synthetic: tuple[list[int], int | None] = ([], None)
    for name, job, tags, run_config, checks in steps:
        if name == "synthetic":
            digits_before_synthetic = (versions_of(dev, "digits"), published(dev))
        run_id = launch(dev, job, tags, run_config, checks)
        status = wait_for(dev, run_id)
        runs[name] = Run(
            run_id,
            status,
            run_events(dev, run_id),
            published(dev),
            failure_messages(dev, run_id) if status != "SUCCESS" else [],
        )
    return History(dev, max(start_versions, default=0), start_published, start_days, runs, digits_before_synthetic)


def test_a_failed_smoke_test_commits_a_version_but_does_not_publish_it(history: History):
    failed = history.runs["failed"]
    assert failed.status == "FAILURE"
    written = failed.materialized("shard_set")
    parent = history.start_published if history.start_published is not None else -1
    assert (written["version"], written["parent"], written["mode"]) == (history.v(1), parent, "append")
    smoke = failed.check("loader_smoke_test")
    assert not smoke["success"] and smoke["metadata"]["version"] == history.v(1)
    assert failed.materialized("published_version") is None
    assert failed.published_after == history.start_published
    assert shard_set(history.dev).version(history.v(1)).parent == history.start_published


def test_the_next_day_is_built_on_the_last_published_version(history: History):
    run = history.runs["next_day"]
    assert run.status == "SUCCESS", run.failures
    written = run.materialized("shard_set")
    parent = history.start_published if history.start_published is not None else -1
    assert (written["version"], written["parent"], written["mode"]) == (history.v(2), parent, "append")
    assert written["lineage"]["days"] == sorted({*history.start_days, NEXT_DAY})
    assert FAILED_DAY not in written["lineage"]["days"]  # the failed version is not the base
    assert run.materialized("published_version")["published"] == history.v(2) == run.published_after
    assert run.check("loader_smoke_test")["metadata"]["version"] == history.v(2)


def test_the_failed_day_runs_again_on_the_published_version(history: History):
    run = history.runs["rerun"]
    assert run.status == "SUCCESS", run.failures
    written = run.materialized("shard_set")
    # The failed version was never published, so its day is new to the base: appended.
    assert (written["version"], written["parent"], written["mode"]) == (history.v(3), history.v(2), "append")
    assert written["replaced_days"] == []
    assert written["lineage"]["days"] == sorted({*history.start_days, FAILED_DAY, NEXT_DAY})
    assert run.published_after == history.v(3)
    info = shard_set(history.dev).version(history.v(3))
    assert (info.parent, sorted(info.partitions)) == (history.v(2), written["lineage"]["days"])


def test_a_day_already_published_is_replaced_and_the_other_days_keep_their_shards(history: History, tmp_path):
    from mds_core import StreamingDataset

    run = history.runs["replace"]
    assert run.status == "SUCCESS", run.failures
    written = run.materialized("shard_set")
    assert (written["version"], written["parent"], written["mode"]) == (history.v(4), history.v(3), "replace")
    assert written["replaced_days"] == [NEXT_DAY] and written["rows_added"] == 60
    days = sorted({*history.start_days, FAILED_DAY, NEXT_DAY})
    assert written["lineage"]["days"] == days and written["rows"] == 60 * len(days)
    shards = shard_set(history.dev)
    before, after = shards.version(history.v(3)), shards.version(history.v(4))
    assert sorted(after.partitions) == days
    for day in days:  # only the replaced day got new shards
        assert (after.partitions[day] == before.partitions[day]) == (day != NEXT_DAY), day
    dataset = StreamingDataset(
        remote=str(history.dev.data_dir / "shard-sets" / "digits"), local=str(tmp_path / "cache"), version=history.v(4)
    )
    assert sorted(int(dataset[i]["id"]) for i in range(len(dataset))) == day_ids(days)


def test_rollback_from_the_publish_job(history: History):
    run = history.runs["rollback"]
    assert run.status == "SUCCESS", run.failures
    assert history.runs["replace"].published_after == history.v(4)
    assert run.published_after == history.v(3)  # the version published before v4
    assert any(f"published version {history.v(3)} (was {history.v(4)})" in (e.get("message") or "") for e in run.events)


def test_the_smoke_check_executed_alone_tests_the_latest_version(history: History):
    run = history.runs["check_alone"]
    assert run.status == "SUCCESS", run.failures
    smoke = run.check("loader_smoke_test")
    assert smoke["success"] and smoke["partition"] == NEXT_DAY
    assert smoke["metadata"]["version"] == history.v(4)  # the latest, although v3 is published
    assert not [e for e in run.events if e["__typename"] == "MaterializationEvent"]  # nothing materialised
    assert run.published_after == history.v(3)  # a check alone publishes nothing
    assert versions_of(history.dev, "digits")[-1] == history.v(4)


def test_two_datasets_keep_separate_histories(history: History):
    run = history.runs["synthetic"]
    assert run.status == "SUCCESS", run.failures
    written = run.materialized("shard_set", dataset="synthetic")
    assert (written["version"], written["parent"], written["mode"]) == (1, -1, "append")
    assert written["lineage"]["dataset"] == "synthetic" and written["lineage"]["days"] == [SYNTHETIC_DAY]
    assert written["rows"] == 2000  # the registry's synthetic rows per day
    assert run.materialized("published_version", dataset="synthetic")["published"] == 1
    assert run.materialized("shard_set") is None  # no digits asset in a synthetic run
    assert versions_of(history.dev, "synthetic") == [1] and shard_set(history.dev, "synthetic").published() == 1
    digits_versions, digits_published = history.digits_before_synthetic
    assert versions_of(history.dev, "digits") == digits_versions  # digits' history unchanged
    assert digits_versions[-1] == history.v(4) and run.published_after == digits_published == history.v(3)


RESOURCES = """
query Resources($repo: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $repo) { __typename
    ... on ResourceDetailsList { results { name resourceType configuredValues { key value type }
                                           configFields { name defaultValueAsJson } } }
    ... on PythonError { message } }
  utilizedEnvVarsOrError(repositorySelector: $repo) { __typename
    ... on EnvVarWithConsumersList { results { envVarName } } }
}
"""

SPARK_RESOURCE = """
query Spark($selector: ResourceSelector!) {
  topLevelResourceDetailsOrError(resourceSelector: $selector) { __typename
    ... on ResourceDetails { name configuredValues { key value type } configFields { name defaultValueAsJson } }
    ... on PythonError { message } }
}
"""

LAUNCHPAD_DEFAULTS = """
query Defaults($selector: PipelineSelector!) {
  runConfigSchemaOrError(selector: $selector) { __typename ... on RunConfigSchema { rootDefaultYaml } }
}
"""

RUNS = """
{ runsOrError { __typename ... on Runs { results { runId status runConfigYaml tags { key value } } } } }
"""


def test_the_ui_never_shows_the_secret_in_the_environment(history: History):
    dev = history.dev
    answers = {
        "resources": dev.graphql(RESOURCES, {"repo": REPOSITORY}),
        "spark": dev.graphql(SPARK_RESOURCE, {"selector": {**REPOSITORY, "resourceName": "spark"}}),
        "launchpad": dev.graphql(LAUNCHPAD_DEFAULTS, {"selector": {**REPOSITORY, "pipelineName": "digits_daily"}}),
        "runs": dev.graphql(RUNS),
        "events": {name: run.events for name, run in history.runs.items()},
    }
    leaks = [name for name, answer in answers.items() if SECRET in json.dumps(answer)]
    assert not leaks, f"the secret appears in GraphQL answers: {leaks}"

    spark = answers["spark"]["topLevelResourceDetailsOrError"]
    assert spark["__typename"] == "ResourceDetails", spark
    values = {v["key"]: v for v in spark["configuredValues"]}
    assert values["conf_json"] == {"key": "conf_json", "value": "MDS_SPARK_CONF", "type": "ENV_VAR"}
    listed = answers["resources"]["allTopLevelResourceDetailsOrError"]["results"]
    assert {r["name"] for r in listed} >= {"spark", "shard_store", "catalog", "landing", "smoke_settings"}
    env_vars = [e["envVarName"] for e in answers["resources"]["utilizedEnvVarsOrError"]["results"]]
    assert "MDS_SPARK_CONF" in env_vars
    assert "MDS_SPARK_CONF" in answers["launchpad"]["runConfigSchemaOrError"]["rootDefaultYaml"]

    # The runs that used it worked: the Spark runs of the history succeeded with the secret set.
    spark_runs = [history.runs[name] for name in ("next_day", "rerun", "replace", "synthetic")]
    assert [run.status for run in spark_runs] == ["SUCCESS"] * 4
    listed_runs = answers["runs"]["runsOrError"]["results"]
    assert {run.run_id for run in spark_runs} <= {r["runId"] for r in listed_runs}
