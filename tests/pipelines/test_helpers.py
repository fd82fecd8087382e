"""The pipelines' pure helpers, called directly: no Spark session, no Dagster run (Dagster's own tutorial
project tests its helpers this way). What they decide is also covered end to end by the Spark tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    BetaWarning,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Failure,
    PreviewWarning,
    build_asset_context,
)

from mds_core import MDSWriter
from mds_core.errors import ConfigurationError
from pipelines.assets.published import publish_runs_version, published_metadata
from pipelines.assets.raw import RawConfig, effective_source, shown_source, source_format
from pipelines.assets.run_family import RUN_ID, version_written_by
from pipelines.assets.shards import days_of, pictures, resolve_mode
from pipelines.assets.smoke import SMOKE_CHECK, telemetry_metadata
from pipelines.assets.validated import counts_check, reasons_check
from pipelines.components import Dataset, switched_on
from pipelines.conventions import schedule_status, sensor_status
from pipelines.factory import dataset_definitions, graph_for
from pipelines.notices import dagster_features_we_pin
from pipelines.registry import COMPONENT_ATTRIBUTES, DatasetSpec, Source, load_registry, packaged_datasets
from pipelines.resources import ShardStore

SPEC = DatasetSpec(name="events", start_date="2026-03-01")


# --- resolving the shard set's mode ------------------------------------------------------------------


def test_auto_appends_new_days_and_replaces_days_the_base_holds() -> None:
    assert resolve_mode("auto", {"2026-03-01"}, ["2026-03-02"], 1) == "append"
    assert resolve_mode("auto", {"2026-03-01"}, ["2026-03-01", "2026-03-02"], 1) == "replace"
    assert resolve_mode("auto", set(), ["2026-03-01"], None) == "append"


def test_append_refuses_a_day_the_base_holds_and_other_modes_pass_through() -> None:
    with pytest.raises(Failure, match=r"day\(s\) 2026-03-01 are already in version 4; appending them again"):
        resolve_mode("append", {"2026-03-01"}, ["2026-03-01"], 4)
    assert resolve_mode("append", {"2026-03-01"}, ["2026-03-02"], 4) == "append"
    assert resolve_mode("replace", set(), ["2026-03-02"], None) == "replace"
    assert resolve_mode("overwrite", {"2026-03-01"}, ["2026-03-01"], 4) == "overwrite"


# --- which version a run wrote, and publishing it ----------------------------------------------------


def commit(store: ShardStore, run_id: str, day: str, mode: str = "append") -> int:
    """A one-row version of ``day`` whose lineage names ``run_id``, as shard_set commits it."""
    shards = store.shard_set(SPEC.name)
    with shards.transaction(mode=mode, lineage={RUN_ID: run_id, "days": [day]}, publish=False) as tx:
        with MDSWriter(out=tx.partition_out(day), columns={"id": "int64"}) as writer:
            writer.write({"id": 0})
    assert tx.version is not None
    return tx.version.number


def passed(store: ShardStore, version: int, run_id: str) -> None:
    store.shard_set(SPEC.name).record_verdict(version, SMOKE_CHECK, {"passed": True, "run_id": run_id, "problems": []})


@pytest.fixture
def store(tmp_path: Path) -> ShardStore:
    return ShardStore(root=str(tmp_path / "sets"))


def test_two_interleaved_runs_of_different_days_each_publish_their_own_version(store: ShardStore) -> None:
    """Run A commits day 1, run B commits day 2 (a newer version), then A publishes, then B: each publishes
    the version its own lineage names, not the newest one Dagster last saw materialised."""
    shards = store.shard_set(SPEC.name)
    mine = commit(store, "run-a", "2026-03-01")
    theirs = commit(store, "run-b", "2026-03-02")
    passed(store, mine, "run-a")
    passed(store, theirs, "run-b")

    assert publish_runs_version(SPEC, shards, {"run-a"}) == mine and shards.published() == mine
    assert publish_runs_version(SPEC, shards, {"run-b"}) == theirs and shards.published() == theirs
    # A re-execution of A (its family: A and the re-execution) finds A's version too.
    assert version_written_by(shards, {"run-a2", "run-a"}).number == mine  # type: ignore[union-attr]


def test_the_newest_version_of_the_run_family_is_the_one_it_wrote(store: ShardStore) -> None:
    shards = store.shard_set(SPEC.name)
    first = commit(store, "root-run", "2026-03-01")
    again = commit(store, "re-execution", "2026-03-01", "replace")  # the step re-ran after a failure past its commit
    commit(store, "another-run", "2026-03-02")
    assert version_written_by(shards, {"root-run", "re-execution"}).number == again != first  # type: ignore[union-attr]
    assert version_written_by(shards, {"nobody"}) is None


def test_publication_refuses_without_a_version_or_without_this_runs_passing_verdict(store: ShardStore) -> None:
    shards = store.shard_set(SPEC.name)
    with pytest.raises(Failure, match="events/shard_set was not materialised in this run"):
        publish_runs_version(SPEC, shards, {"run-a"})
    version = commit(store, "run-a", "2026-03-01")
    with pytest.raises(Failure, match=f"version {version} was not published: the {SMOKE_CHECK} check did not pass"):
        publish_runs_version(SPEC, shards, {"run-a"})
    passed(store, version, "a-check-run-alone")  # a verdict of another run does not count
    with pytest.raises(Failure, match="did not pass in this run"):
        publish_runs_version(SPEC, shards, {"run-a"})
    assert shards.published() is None


def test_days_of_a_version_are_its_partitions(store: ShardStore) -> None:
    version = commit(store, "run-a", "2026-03-01")
    assert days_of(None) == set()
    assert days_of(store.shard_set(SPEC.name).version(version)) == {"2026-03-01"}


def test_published_metadata_names_the_versions_and_hides_credentials() -> None:
    meta = published_metadata("s3://key:secret@bucket/sets/events", 3, None)
    assert meta["published"] == 3 and meta["previously_published"] == -1
    assert "secret" not in str(meta) and meta["store_url"] == "s3://***@bucket/sets/events"


def test_published_metadata_pins_the_table_version_beside_the_shard_set_version() -> None:
    source = {"kind": "delta", "table_uri": "s3://lake/events", "table_id": "4f1c", "versions": [3, 12]}
    by_uri = published_metadata("s3://bucket/sets/events", 7, 6, source)
    assert (by_uri["table"], by_uri["table_versions"]) == ("s3://lake/events", "3..12")
    assert by_uri["read_it"].value == (
        "```python\n"
        "# shard-set version 7: Delta table s3://lake/events (id 4f1c), table versions 3 to 12\n"
        "StreamingDataset(remote='s3://bucket/sets/events', version=7, batch_size=32)\n"
        '# its rows as the table had them: spark.read.format("delta").option("versionAsOf", 12).load("s3://lake/events")\n'
        "```"
    )
    by_name = published_metadata("s3://bucket/sets/events", 7, 6, source | {"uc_name": "main.raw.events"})
    assert by_name["table"] == "main.raw.events"
    assert 'option("versionAsOf", 12).table("main.raw.events")' in by_name["read_it"].value


def test_sample_pictures_that_cannot_be_drawn_only_log(store: ShardStore) -> None:
    assert pictures(build_asset_context(), store.url(SPEC.name), 1, store, SPEC) == {}


# --- counts checks, sources, telemetry ---------------------------------------------------------------


def test_the_counts_check_fails_on_missing_rows_a_high_share_or_leftover_errors() -> None:
    asset = AssetKey(["events", "validated_table"])
    ok = counts_check({"in": 100, "valid": 99, "quarantined": 1}, 0.01, {"id: null": 1}, {}, asset)
    assert ok.passed and ok.description is None and ok.metadata["quarantined_fraction"].value == 0.01
    missing = counts_check({"in": 100, "valid": 98, "quarantined": 1}, 0.01, {}, {}, asset)
    assert not missing.passed and missing.description == "rows went missing: in != valid + quarantined"
    high = counts_check({"in": 100, "valid": 95, "quarantined": 5}, 0.01, {}, {}, asset)
    assert high.description == "5.00% of rows quarantined, above the threshold of 1.00%"
    leftover = counts_check({"in": 10, "valid": 10, "quarantined": 0}, 0.01, {}, {"id": ["x"]}, asset)
    assert not leftover.passed and "pandera still finds errors in the valid rows" in (leftover.description or "")


def test_the_reasons_check_fails_when_a_quarantined_row_names_no_reason() -> None:
    assert reasons_check(SPEC, 3, 0, {"a": 3}).passed
    failed = reasons_check(SPEC, 3, 2, {"a": 1})
    assert not failed.passed and failed.description == "2 of 3 quarantined rows name no reason"


def test_a_runs_source_overrides_the_registrys_and_is_shown_without_credentials() -> None:
    source = Source(kind="digits", rows_per_day=180)
    run = effective_source(source, RawConfig(kind="path", path="s3://key:secret@bucket/day/", format="csv"))
    assert (run.kind, run.format, run.rows_per_day) == ("path", "csv", 180)
    assert shown_source(run)["path"] == "s3://***@bucket/day/"
    assert source_format(Source(kind="path", path="/data/day.json")) == "json"
    assert source_format(Source(kind="path", path="/data/day/")) == "parquet"


def test_telemetry_metadata_rounds_the_loaders_figures() -> None:
    assert telemetry_metadata({}) == {}
    totals = {"decode_seconds": 0.123456, "bytes_downloaded": 10, "shards_downloaded": 1, "cache_hits": 2}
    meta = telemetry_metadata(
        {"wait_seconds": 1.234567, "wait_max_seconds": 0.5, "totals": {**totals, "cache_misses": 1}}
    )
    assert (meta["wait_seconds"], meta["decode_seconds"], meta["cache_misses"]) == (1.2346, 0.1235, 1)


# --- the datasets, their components and what each gets ---------------------------------------------------


def test_the_package_declares_its_datasets_as_components() -> None:
    specs = {spec.name: spec for spec in packaged_datasets()}
    assert sorted(specs) == ["digits", "synthetic"]
    assert specs["digits"].source.rows_per_day == 180 and specs["synthetic"].size_limit == "4mb"
    assert set(Dataset.model_fields) - set(DatasetSpec.model_fields) == set(COMPONENT_ATTRIBUTES)
    component = Dataset(**specs["digits"].model_dump(), automation="on")
    assert component.spec() == specs["digits"]


def test_a_registry_file_replaces_the_packaged_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = tmp_path / "datasets.yaml"
    registry.write_text("datasets:\n  - name: events\n    source: {kind: table, table: analytics.events}\n")
    monkeypatch.setenv("MDS_DATASETS", str(registry))
    [events] = load_registry()
    assert events.source.table == "analytics.events"
    monkeypatch.delenv("MDS_DATASETS")
    assert [spec.name for spec in load_registry()] == ["digits", "synthetic"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("datasets:\n  - name: Events\n", "String should match pattern"),
        ("datasets:\n  - name: events\n    start_date: '2026-02-30'\n", "day is out of range for month"),
        ("datasets:\n  - name: events\n    source: {kind: kafka}\n", "source.kind"),
        ("datasets:\n  - name: events\n  - name: events\n", "unique names, got ['events', 'events']"),
        ("datasets: []\n", "needs at least one dataset"),
        ("datasets: [\n", "while parsing"),
    ],
)
def test_a_bad_registry_is_a_configuration_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    registry = tmp_path / "datasets.yaml"
    registry.write_text(text)
    with pytest.raises(ConfigurationError, match=f"dataset registry {registry}") as error:
        load_registry(registry)
    assert message in str(error.value)


def test_automation_is_on_only_when_the_deployment_says_so() -> None:
    assert [switched_on(value) for value in ("on", " ON ", "1", "true", "yes")] == [True] * 5
    assert [switched_on(value) for value in ("", "off", "0", "no")] == [False] * 4
    assert [schedule_status(on) for on in (True, False)] == [
        DefaultScheduleStatus.RUNNING,
        DefaultScheduleStatus.STOPPED,
    ]
    assert [sensor_status(on) for on in (True, False)] == [DefaultSensorStatus.RUNNING, DefaultSensorStatus.STOPPED]


def test_the_graph_materialize_runs_is_the_code_locations() -> None:
    parts = dataset_definitions(SPEC)
    graph = graph_for(SPEC)
    keys = {key.to_user_string() for node in graph for key in getattr(node, "keys", set())}
    assert keys == {key.to_user_string() for asset in parts.assets for key in asset.keys}
    assert len(graph) == len(parts.assets) + len(parts.checks) == 6


def test_notices_are_silenced_by_message_only_for_the_features_we_use() -> None:
    notices = [
        ("Specifying a partitions_def on an AssetCheckSpec is currently in preview, and may ...", PreviewWarning),
        ("Parameter `backfill_policy` of function `asset` is currently in beta, and ...", BetaWarning),
        ("Class `SomethingNew` is currently in beta, and may have breaking changes", BetaWarning),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dagster_features_we_pin():
            for message, category in notices:
                warnings.warn(message, category, stacklevel=1)
    assert [str(warning.message) for warning in caught] == [notices[-1][0]]  # only the feature we do not use
