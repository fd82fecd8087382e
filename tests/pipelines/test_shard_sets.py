"""The whole graph through dagster.materialize(): versions, appends, backfills, the smoke test and publication."""

from __future__ import annotations

from pathlib import Path

import fsspec
from dagster import AssetCheckKey, AssetSelection

from pipelines.assets.plan import PLAN_CHECK
from pipelines.assets.smoke import SMOKE_CHECK
from pipelines.assets.validated import COUNTS_CHECK
from pipelines.conventions import key
from pipelines.resources import ShardStore
from pipelines.runs import materialize_days
from tests.pipelines.conftest import (
    DAYS,
    check,
    digits,
    materialization,
    meta,
    only_failure,
    shard_files,
    stream_ids,
    write_landing_parquet,
    write_rows,
)


def test_full_graph_backfill_on_the_embedded_default(resources, spec, tmp_path):
    """Two days as one run (a backfill), full refresh: one version, smoke-tested, then published."""
    result = materialize_days(spec, DAYS[:2], resources, mode="overwrite")
    assert result.success
    assert check(result, COUNTS_CHECK).passed
    shard_set = resources["shard_store"].shard_set("digits")
    smoke = check(result, SMOKE_CHECK)
    report = meta(smoke)
    assert smoke.passed, smoke.description
    assert report["exactly_once"] and report["continuation_matches"] and report["rows_streamed"] == 120
    assert report["num_workers"] == "2" and report["rows_per_second"] > 0 and report["resumed_at_sample"] > 0
    telemetry = report["telemetry"]  # the loader's own counters for the smoke test's full epoch
    assert telemetry["samples"] == 120 and telemetry["batches"] == 15 and len(telemetry["workers"]) == 2
    assert sum(w["samples"] for w in telemetry["workers"]) == 120 and report["decode_seconds"] > 0
    written_shards = shard_set.shards(1)
    assert report["shards_downloaded"] == len(written_shards)  # each shard once for the node
    # The verdict publication read: kept with the version, naming the run that tested it.
    assert shard_set.verdict(1, SMOKE_CHECK) == {"passed": True, "run_id": result.run_id, "problems": []}
    assert report["bytes_downloaded"] == sum((s.zip_data or s.raw_data).bytes for s in written_shards)

    plan = check(result, PLAN_CHECK)  # no cache limit declared: nothing to warn about
    planned = meta(plan)
    assert plan.passed and planned["version"] == 1 and planned["world"] == "2 node(s) x 2 rank(s), 2 worker(s)"
    assert planned["plan_json"]["settings"]["shards"] == len(written_shards)
    assert sum(planned["bytes_per_node_first_epoch"]) >= report["bytes_downloaded"] // 2
    assert planned["plot"].startswith("![cache and downloads per node](data:image/png;base64,")
    # At a glance in the UI: the headline as the description, the settings as text (never plotted), rounded rates.
    most = max(planned["bytes_per_node_first_epoch"])
    assert plan.description.startswith(f"2 node(s) x 2 rank(s), 2 worker(s): at most {most:,} bytes per node")
    assert planned["batch_size"] == "4" and "Set MDS_PLAN_BANDWIDTH" in planned["plan"]
    assert report["rows_per_second"] == round(report["rows_per_second"], 1)

    shards_meta = meta(materialization(result, "shard_set"))
    assert shards_meta["version"] == 1 and shards_meta["mode"] == "overwrite"
    assert shards_meta["rows"] == shards_meta["rows_added"] == 120 and shards_meta["shards"] >= 1
    assert shards_meta["bytes"] > 0 and shards_meta["compression_ratio"] > 1 and shards_meta["rows_per_second"] > 0
    assert shards_meta["store_url"] == resources["shard_store"].url("digits")
    assert shards_meta["lineage"]["days"] == DAYS[:2] and shards_meta["lineage"]["dagster_run_id"] == result.run_id
    source = shards_meta["lineage"]["source"]
    assert (source["kind"], source["rows_per_day"]) == ("digits", 60)
    assert len(shards_meta["preview"].records) == 5
    assert shards_meta["dagster/row_count"] == 120 and shards_meta["dagster/uri"] == shards_meta["store_url"]
    columns = shards_meta["dagster/column_schema"].columns
    assert [c.name for c in columns] == ["day", "id", "label", "pixels"]  # MDS order
    assert shards_meta["preview_pixels"].startswith("![pixels](data:image/png;base64,")
    assert shard_set.version(1).partitions.keys() == set(DAYS[:2])

    published = meta(materialization(result, "published_version"))
    assert published["published"] == 1 and published["previously_published"] == -1 and shard_set.published() == 1
    assert stream_ids(resources, 1, tmp_path / "cache") == list(range(120))


def test_next_day_appends_a_version_writing_only_its_shards(resources, spec, tmp_path):
    assert materialize_days(spec, DAYS[:1], resources).success
    store = Path(resources["shard_store"].url("digits"))
    before = shard_files(store)

    result = materialize_days(spec, DAYS[1:2], resources)
    assert result.success
    shards_meta = meta(materialization(result, "shard_set"))
    assert (shards_meta["version"], shards_meta["parent"], shards_meta["mode"]) == (2, 1, "append")
    assert shards_meta["rows"] == 120 and shards_meta["rows_added"] == 60
    assert shards_meta["lineage"]["days"] == DAYS[:2] and shards_meta["lineage"]["added_days"] == DAYS[1:2]

    after = shard_files(store)
    assert {name: after[name] for name in before} == before, "an append rewrote existing shards"
    added = set(after) - set(before)
    assert added and len(added) == shards_meta["shards_added"] == shards_meta["shards"] - len(before)

    shard_set = resources["shard_store"].shard_set("digits")
    assert shard_set.published() == 2
    assert stream_ids(resources, 1, tmp_path / "cache1") == list(range(60))
    assert stream_ids(resources, 2, tmp_path / "cache2") == list(range(120))

    repeat = materialize_days(spec, DAYS[1:2], resources, mode="append", raise_on_error=False)
    assert not repeat.success  # appending a day twice would duplicate its rows
    assert "already in version 2" in only_failure(repeat)[1].message
    assert [v.number for v in shard_set.versions()] == [1, 2]


def test_quarantine_above_threshold_blocks_the_shards(resources, spark_session, tmp_path):
    write_landing_parquet(spark_session, tmp_path / "landing", DAYS[0], bad_label=11)
    spec = digits(kind="path", path=str(tmp_path / "landing" / DAYS[0]))
    result = materialize_days(spec, DAYS[:1], resources, raise_on_error=False)
    assert not result.success and not check(result, COUNTS_CHECK).passed
    assert not result.asset_materializations_for_node("digits__shard_set")
    assert resources["shard_store"].shard_set("digits").versions() == []


def test_a_day_with_no_valid_rows_is_a_clear_failure(resources, spark_session, tmp_path):
    write_rows(spark_session, tmp_path / "src", [(1, 12, [0] * 64)])
    spec = digits(kind="path", path=str(tmp_path / "src"))
    lenient = {"ops": {"digits__validated_table": {"config": {"max_quarantined_fraction": 1.0}}}}
    result = materialize_days(spec, DAYS[:1], resources, run_config=lenient, raise_on_error=False)
    step, error = only_failure(result)  # once: a bad input is not retried
    assert step == "digits__shard_set" and "no validated rows for 2026-01-01" in error.message
    assert resources["shard_store"].shard_set("digits").versions() == []


def test_shard_set_on_s3(resources, spec, s3_server, tmp_path):
    """The store is a bucket on the loopback S3 server: written, smoke-tested and read back over HTTP."""
    bucket = s3_server.new_bucket()
    resources["shard_store"] = ShardStore(root=f"s3://{bucket}/shard-sets", cache_dir=str(tmp_path / "cache"))
    result = materialize_days(spec, DAYS[:1], resources)
    assert result.success and check(result, SMOKE_CHECK).passed
    assert meta(materialization(result, "shard_set"))["store_url"] == f"s3://{bucket}/shard-sets/digits"
    assert resources["shard_store"].shard_set("digits").published() == 1
    assert stream_ids(resources, 1, tmp_path / "read") == list(range(60))
    fs = fsspec.filesystem("s3", client_kwargs={"endpoint_url": s3_server.endpoint})
    assert any(path.endswith(".zstd") for path in fs.find(f"{bucket}/shard-sets/digits"))


def test_no_publication_in_a_run_without_the_smoke_test(resources, spec):
    without_smoke = AssetSelection.all() - AssetSelection.checks(AssetCheckKey(key(spec, "shard_set"), SMOKE_CHECK))
    result = materialize_days(spec, DAYS[:1], resources, selection=without_smoke, raise_on_error=False)
    assert not result.success
    assert not [e for e in result.get_asset_check_evaluations() if e.check_name == SMOKE_CHECK]
    assert materialization(result, "shard_set")  # the version was committed ...
    assert not result.asset_materializations_for_node("digits__published_version")  # ... but not published
    step, error = only_failure(result)
    assert step == "digits__published_version" and "did not pass in this run" in error.message
    assert resources["shard_store"].shard_set("digits").published() is None
    assert resources["shard_store"].shard_set("digits").verdict(1, SMOKE_CHECK) is None
