"""Headless Chromium opens the asset graph in the Dagster UI; a screenshot is kept as a test artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import DagsterDev

pytestmark = pytest.mark.slow  # a real webserver and its runs: make test-all

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
GROUPS = ("digits", "synthetic")  # one asset group per dataset in the registry
GROUP = "digits"
ASSETS = ("raw_table", "validated_table", "shard_set", "published_version")  # shown by name in their group


def named(browser, text: str) -> int:
    from selenium.webdriver.common.by import By

    return len(browser.find_elements(By.XPATH, f"//*[normalize-space(text())='{text}']"))


def dismiss_welcome_dialog(browser) -> None:
    """A first visit shows a 'Join the Dagster community' dialog over the graph; skip it."""
    from selenium.webdriver.common.by import By

    for button in browser.find_elements(By.XPATH, "//button[normalize-space(.)='Skip']"):
        button.click()


def settled(browser) -> bool:
    dismiss_welcome_dialog(browser)
    return "Loading..." not in browser.page_source and not named(browser, "Skip")


def test_asset_graph_shows_every_asset(dagster_dev: DagsterDev, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        # The global lineage shows one (collapsed) group per registered dataset.
        browser.get(f"{dagster_dev.url}/asset-groups")
        WebDriverWait(browser, 90).until(lambda b: all(named(b, group) >= 1 for group in GROUPS))
        assert "Global asset lineage" in browser.page_source
        # The digits group's own lineage: each of its assets is a node of the graph.
        browser.get(f"{dagster_dev.url}/locations/pipelines/asset-groups/{GROUP}/lineage")
        WebDriverWait(browser, 90).until(lambda b: all(named(b, name) >= 1 for name in ASSETS))
        # The dialog may open after the graph has rendered: keep skipping it until the page is settled.
        WebDriverWait(browser, 30).until(settled)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "asset-graph.png"))
    assert all(named(browser, name) >= 1 for name in ASSETS)
    assert named(browser, GROUP) >= 1 and "Asset Group in" in browser.page_source
    assert (ARTIFACTS / "asset-graph.png").stat().st_size > 10_000
