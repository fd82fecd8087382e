"""Day-to-day operations through the real webserver (`dg dev`, GraphQL), as a person does them in the UI.

One ordered history, launched once (each run starts a Spark JVM): a day launched as the UI launches it, then
streamed; a day whose smoke test fails (a Launchpad run config); the next day, built on the last published
version; a rollback from the publish job with the Launchpad's defaults; and the smoke check executed alone.
tests/pipelines/test_daily_operations.py runs these scenarios in more variations in-process; this history checks
what only the webserver path has: launches, run configs, tags and selections as the UI sends them, and the events
it shows. Every number asserted is exact, relative to the versions the instance held before the history.

The UI must never show a secret: `dg dev` runs with one in $MDS_SPARK_CONF; no GraphQL answer (resources, the
Launchpad's defaults, runs' config and events) contains it, while the runs that used it worked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.e2e.conftest import SECRET, DagsterDev
from tests.e2e.graphql import (
    REPOSITORY,
    SHARD_SET_KEY,
    day_ids,
    entries,
    failure_messages,
    launch,
    run_events,
    wait_for,
)

# make test-all; the first test also waits for the whole history (five runs, each starting a Spark JVM)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

FIRST_DAY, FAILED_DAY, NEXT_DAY = "2026-01-02", "2026-01-05", "2026-01-06"
FAILING_SMOKE = {"resources": {"smoke_settings": {"config": {"min_rows_per_second": 10**12}}}}
SMOKE_CHECK_ALONE = [{"assetKey": SHARD_SET_KEY, "name": "loader_smoke_test"}]  # the check's "Execute" button


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

    def materialization(self, asset: str, dataset: str = "digits") -> dict[str, Any]:
        """The metadata of the run's materialization of ``asset``, which must be there."""
        found = self.materialized(asset, dataset)
        assert found is not None, f"run {self.run_id} did not materialize {dataset}/{asset}"
        return found

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
        ("first_day", "digits_daily", {"dagster/partition": FIRST_DAY}, None, None),
        ("failed", "digits_daily", {"dagster/partition": FAILED_DAY}, FAILING_SMOKE, None),
        ("next_day", "digits_daily", {"dagster/partition": NEXT_DAY}, None, None),
        ("rollback", "digits_publish", {}, None, None),  # the Launchpad's default config: roll back
        ("check_alone", "__ASSET_JOB", {"dagster/partition": NEXT_DAY}, None, SMOKE_CHECK_ALONE),
    ]
    runs: dict[str, Run] = {}
    for name, job, tags, run_config, checks in steps:
        run_id = launch(dev, job, tags, run_config, checks)
        status = wait_for(dev, run_id)
        failures = failure_messages(dev, run_id) if status != "SUCCESS" else []
        runs[name] = Run(run_id, status, run_events(dev, run_id), published(dev), failures)
    return History(dev, max(start_versions, default=0), start_published, start_days, runs)


def test_the_first_day_launched_as_the_ui_does_is_published_and_streams_its_rows(history: History, tmp_path):
    from mds_core import StreamingDataset

    run = history.runs["first_day"]
    assert run.status == "SUCCESS", run.failures
    written = run.materialization("shard_set")
    parent = history.start_published if history.start_published is not None else -1
    mode = "replace" if FIRST_DAY in history.start_days else "append"
    assert (written["version"], written["parent"], written["mode"]) == (history.v(1), parent, mode)
    assert run.published_after == history.v(1)
    days = sorted({*history.start_days, FIRST_DAY})
    root = str(history.dev.data_dir / "shard-sets" / "digits")
    dataset = StreamingDataset(remote=root, local=str(tmp_path / "cache"), version=history.v(1))
    assert sorted(int(dataset[i]["id"]) for i in range(len(dataset))) == day_ids(days)  # 60 rows a day
    sample = dataset[0]
    assert sample["pixels"].shape == (64,) and 0 <= int(sample["label"]) <= 9


def test_a_failed_smoke_test_commits_a_version_but_does_not_publish_it(history: History):
    failed = history.runs["failed"]
    assert failed.status == "FAILURE"
    written = failed.materialization("shard_set")
    assert (written["version"], written["parent"], written["mode"]) == (history.v(2), history.v(1), "append")
    smoke = failed.check("loader_smoke_test")
    assert not smoke["success"] and smoke["metadata"]["version"] == history.v(2)
    assert failed.materialized("published_version") is None
    assert failed.published_after == history.v(1)
    assert shard_set(history.dev).version(history.v(2)).parent == history.v(1)


def test_the_next_day_is_built_on_the_last_published_version(history: History):
    run = history.runs["next_day"]
    assert run.status == "SUCCESS", run.failures  # the failed run's config did not carry over
    written = run.materialization("shard_set")
    assert (written["version"], written["parent"], written["mode"]) == (history.v(3), history.v(1), "append")
    assert written["lineage"]["days"] == sorted({*history.start_days, FIRST_DAY, NEXT_DAY})
    assert FAILED_DAY not in written["lineage"]["days"]  # the failed version is not the base
    assert run.materialization("published_version")["published"] == history.v(3) == run.published_after
    assert run.check("loader_smoke_test")["metadata"]["version"] == history.v(3)


def test_rollback_from_the_publish_job(history: History):
    run = history.runs["rollback"]
    assert run.status == "SUCCESS", run.failures
    assert history.runs["next_day"].published_after == history.v(3)
    assert run.published_after == history.v(1)  # the version published before v3
    assert any(f"published version {history.v(1)} (was {history.v(3)})" in (e.get("message") or "") for e in run.events)


def test_the_smoke_check_executed_alone_tests_the_latest_version(history: History):
    run = history.runs["check_alone"]
    assert run.status == "SUCCESS", run.failures
    smoke = run.check("loader_smoke_test")
    assert smoke["success"] and smoke["partition"] == NEXT_DAY
    assert smoke["metadata"]["version"] == history.v(3)  # the latest, although v1 is published
    assert not [e for e in run.events if e["__typename"] == "MaterializationEvent"]  # nothing materialised
    assert run.published_after == history.v(1)  # a check alone publishes nothing
    assert versions_of(history.dev, "digits")[-1] == history.v(3)


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
    assert values["spark_config_json"] == {"key": "spark_config_json", "value": "MDS_SPARK_CONF", "type": "ENV_VAR"}
    # Not only secrets: every setting whose variable is set shows the variable's name, not its value.
    assert values["master"] == {"key": "master", "value": "MDS_SPARK_MASTER", "type": "ENV_VAR"}
    listed = answers["resources"]["allTopLevelResourceDetailsOrError"]["results"]
    assert {r["name"] for r in listed} >= {"spark", "shard_store", "catalog", "landing", "smoke_settings"}
    env_vars = [e["envVarName"] for e in answers["resources"]["utilizedEnvVarsOrError"]["results"]]
    assert {"MDS_SPARK_CONF", "MDS_SPARK_MASTER"} <= set(env_vars)
    assert "MDS_SPARK_CONF" in answers["launchpad"]["runConfigSchemaOrError"]["rootDefaultYaml"]

    # The runs that used it worked: the Spark runs of the history succeeded with the secret set.
    spark_runs = [history.runs[name] for name in ("first_day", "next_day")]
    assert [run.status for run in spark_runs] == ["SUCCESS"] * 2
    listed_runs = answers["runs"]["runsOrError"]["results"]
    assert {run.run_id for run in spark_runs} <= {r["runId"] for r in listed_runs}
