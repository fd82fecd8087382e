"""After `make demo`, `make ui` tells the truth at a glance: the runs under the dataset's job, on the
Overview's timeline, a passed result for every check of every day, and a partition bar the data fills.

The figures come from the webserver's GraphQL API (what the pages render); headless Chromium then takes
the screenshots docs/pipelines.md shows (tests/e2e/artifacts/, copied to docs/images/ by hand).
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import DEMO_TIER, Demo
from tests.e2e.test_browser import ARTIFACTS, named, settled

pytestmark = DEMO_TIER  # the demo and a real webserver

JOB = "digits_daily"
SHARDS = {"path": ["digits", "shard_set"]}
CHECKS = ("loader_smoke_test", "training_plan")

RUNS = """{ runsOrError { ... on Runs { results { runId pipelineName status
    repositoryOrigin { repositoryLocationName } tags { key value } } } } }"""
PARTITIONS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
    partitionStats { numMaterialized numPartitions numFailed }
    assetChecksOrError { ... on AssetChecks { checks { name
        executionForLatestMaterialization { status partition } } } } } } }"""
EXECUTIONS = """query($key: AssetKeyInput!, $name: String!) {
    assetCheckExecutions(assetKey: $key, checkName: $name, limit: 20) { status partition } }"""


def demo_days(output: str) -> list[str]:
    return re.findall(r"^== digits (\d{4}-\d\d-\d\d) ", output, flags=re.MULTILINE)


def test_the_demo_runs_each_day_through_the_daily_job(demo: Demo):
    runs = demo.dev.graphql(RUNS)["runsOrError"]["results"]
    days = demo_days(demo.output)
    assert len(days) == 3
    assert sorted({tag["value"] for run in runs for tag in run["tags"] if tag["key"] == "dagster/partition"}) == days
    assert {run["pipelineName"] for run in runs} == {JOB}  # no __ephemeral_asset_job__
    assert {run["status"] for run in runs} == {"SUCCESS"}
    # The Overview's timeline draws only runs that name their code location.
    assert {run["repositoryOrigin"]["repositoryLocationName"] for run in runs if run["repositoryOrigin"]} == {
        "pipelines"
    }
    assert all(run["repositoryOrigin"] for run in runs)


def test_every_check_has_a_passed_result_for_every_day(demo: Demo):
    days = demo_days(demo.output)
    for name in CHECKS:
        executions = demo.dev.graphql(EXECUTIONS, {"key": SHARDS, "name": name})["assetCheckExecutions"]
        assert sorted((e["partition"], e["status"]) for e in executions) == [(day, "SUCCEEDED") for day in days], name
    node = demo.dev.graphql(PARTITIONS, {"key": SHARDS})["assetNodeOrError"]
    latest = {c["name"]: c["executionForLatestMaterialization"] for c in node["assetChecksOrError"]["checks"]}
    assert latest == {name: {"status": "SUCCEEDED", "partition": days[-1]} for name in CHECKS}  # the badge: 2 / 2


def test_the_partition_bar_matches_the_data(demo: Demo):
    stats = demo.dev.graphql(PARTITIONS, {"key": SHARDS})["assetNodeOrError"]["partitionStats"]
    assert stats == {"numMaterialized": 3, "numPartitions": 3, "numFailed": 0}
    assert "synthetic" not in (demo.dev.data_dir / "demo-datasets.yaml").read_text()  # only what the demo ran


PAGES = {
    "demo-lineage.png": ("/locations/pipelines/asset-groups/digits/lineage", "shard_set"),
    "demo-checks.png": ("/assets/digits/shard_set?view=checks", "loader_smoke_test"),
    "demo-runs.png": ("/runs", JOB),
    "demo-timeline.png": ("/overview/activity/timeline", JOB),
}


@pytest.mark.parametrize("name", PAGES)
def test_screenshots_of_the_demo(demo: Demo, browser, name: str):
    from selenium.webdriver.support.ui import WebDriverWait

    path, shown = PAGES[name]
    try:
        browser.get(demo.dev.url + path)
        WebDriverWait(browser, 90).until(lambda b: named(b, shown) >= 1 or shown in b.page_source)
        WebDriverWait(browser, 30).until(settled)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / name))
    assert "__ephemeral_asset_job__" not in browser.page_source
    assert "No runs or scheduled ticks" not in browser.page_source
    assert (ARTIFACTS / name).stat().st_size > 10_000
