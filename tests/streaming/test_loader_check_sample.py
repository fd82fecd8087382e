"""check_version: a version's new shards in full plus a bounded, seeded sample of the rest, through a bounded cache."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from mds_core.errors import ConfigurationError
from mds_core.storage.remote import open_store
from mds_core.streaming.loader_check import LoaderCheckReport, check_version
from mds_core.streaming.version_sample import fetch_sample, select_subset
from mds_core.versions import ShardSet
from tests.streaming.support import MDS, run, write_rows

ROWS_PER_DAY = 60


def _day(shard_set: ShardSet, day: int) -> str:
    """Append one day of rows (several small shards); returns the transaction id."""
    rows = ({"id": day * ROWS_PER_DAY + i, "text": f"day {day} row {i}"} for i in range(ROWS_PER_DAY))
    with shard_set.transaction("append", publish=False) as tx:
        write_rows(tx.out, {"id": "int", "text": "str"}, rows, size_limit=700)
    return tx.id


@pytest.fixture
def three_days(tmp_path: Path) -> tuple[str, list[str]]:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    return root, [_day(shard_set, day) for day in range(3)]


def _check(root: str, tmp_path: Path, version: int = 3, **kwargs: Any) -> LoaderCheckReport:
    """``check_version`` on 4-sample batches, its cache and jobs in ``tmp_path`` unless ``kwargs`` say otherwise."""
    defaults: dict[str, Any] = {"local": str(tmp_path / "cache"), "batch_size": 4, "job_root": str(tmp_path)}
    return check_version(root, version, **{**defaults, **kwargs})


def _shard_files(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("shard.*") if p.is_file()}


def test_the_subset_is_the_new_shards_and_a_sample_within_the_bounds(three_days) -> None:
    root, transactions = three_days
    shard_set = ShardSet(root)
    all_shards = shard_set.shards(3)
    new = [s for s in all_shards if s.raw_data.basename.startswith(f"data/{transactions[2]}/")]
    assert len(new) >= 3 and sum(s.samples for s in new) == ROWS_PER_DAY
    subset = select_subset(shard_set, 3, sample_rows=50)
    assert subset.new == new
    assert subset.sampled and sum(s.samples for s in subset.sampled) <= 50
    assert not {s.raw_data.basename for s in subset.sampled} & {s.raw_data.basename for s in new}
    assert subset.limited_by == "rows" and subset.total_rows == 3 * ROWS_PER_DAY
    # the subset keeps the version's order, so its index reads like a slice of the version's
    order = [s.raw_data.basename for s in all_shards]
    positions = [order.index(s.raw_data.basename) for s in subset.shards]
    assert positions == sorted(positions) and subset.rows == sum(s.samples for s in subset.shards)
    assert select_subset(shard_set, 3, sample_rows=0).sampled == []
    everything = select_subset(shard_set, 3, sample_rows=None)
    assert everything.rows == 3 * ROWS_PER_DAY and everything.limited_by == "nothing"


def test_the_sample_is_reproducible_for_a_seed_and_moves_with_seed_and_version(three_days) -> None:
    root, _ = three_days
    shard_set = ShardSet(root)

    def drawn(seed: int, version: int = 3) -> list[str]:
        return [s.raw_data.basename for s in select_subset(shard_set, version, seed=seed, sample_rows=40).sampled]

    assert drawn(0) == drawn(0) and drawn(7) == drawn(7)
    assert len({tuple(drawn(seed)) for seed in range(8)}) > 1  # other seeds draw other shards
    # over days (seed fixed, version moving) the sample wanders over the older shards
    shard_set_days = {tuple(drawn(0, version)) for version in (2, 3)}
    assert len(shard_set_days) == 2


def test_a_bounded_check_passes_and_reads_only_the_subset(three_days, tmp_path: Path) -> None:
    root, _ = three_days
    cache = tmp_path / "cache"
    subset = select_subset(ShardSet(root), 3, seed=5, sample_rows=50)
    report = _check(root, tmp_path, seed=5, sample_rows=50, num_workers=2)
    assert report.passed, report.problems
    assert report.exactly_once and report.continuation_matches and report.version == 3
    assert report.samples_expected == report.samples_streamed == subset.rows < 3 * ROWS_PER_DAY
    checked = report.subset
    assert checked["new_shards"] == [s.raw_data.basename for s in subset.new]
    assert checked["sampled_shards"] == [s.raw_data.basename for s in subset.sampled]
    assert checked["new_rows"] == ROWS_PER_DAY and checked["sampled_rows"] <= 50
    assert checked["total_shards"] == len(ShardSet(root).shards(3)) and checked["seed"] == 5
    # the cache holds exactly the subset: nothing else of the version was downloaded
    assert _shard_files(cache) == {s.raw_data.basename for s in subset.shards}
    # the loader downloaded the new shards itself; the sample was fetched before it ran
    assert report.telemetry["totals"]["bytes_downloaded"] == sum(s.raw_data.bytes for s in subset.new)
    assert json.loads(json.dumps(report.to_json()))["subset"] == checked


def test_a_temporary_cache_is_removed(three_days, tmp_path: Path, monkeypatch) -> None:
    root, _ = three_days
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    report = _check(root, tmp_path, 2, local=None, sample_rows=20, num_workers=0, job_root=str(tmp_path / "jobs"))
    assert report.passed, report.problems
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("mds-check-version-")]


def test_a_damaged_new_shard_fails_the_check_naming_it(three_days, tmp_path: Path) -> None:
    root, transactions = three_days
    damaged = sorted((Path(root) / "data" / transactions[2]).glob("shard.*"))[1]
    damaged.write_bytes(damaged.read_bytes()[:-10])  # truncated on the store
    report = _check(root, tmp_path, sample_rows=50, num_workers=2)
    assert not report.passed
    assert any(damaged.name in problem and transactions[2] in problem for problem in report.problems), report.problems


def test_a_damaged_sampled_shard_fails_the_check_naming_it(three_days, tmp_path: Path) -> None:
    root, _ = three_days
    subset = select_subset(ShardSet(root), 3, sample_rows=None)
    damaged = Path(root) / subset.sampled[0].raw_data.basename
    damaged.write_bytes(damaged.read_bytes()[:-10])
    report = _check(root, tmp_path, sample_rows=None, num_workers=0)
    assert not report.passed and subset.sampled[0].raw_data.basename in report.problems[0], report.problems
    assert report.problems[0].startswith("fetching the sample failed")


def test_the_seconds_budget_cuts_the_sample_and_leaves_no_extra_files(three_days, tmp_path: Path) -> None:
    root, _ = three_days
    subset = select_subset(ShardSet(root), 3, sample_rows=None, sample_seconds=1.0)
    drawn = list(subset.sampled)
    assert len(drawn) >= 4
    ticks = iter([0.0, 0.2, 0.5, 1.5] + [9.0] * 100)  # the budget runs out after two shards
    fetch_sample(subset, open_store(root), str(tmp_path / "cache"), clock=lambda: next(ticks))
    assert subset.sampled == drawn[:2] and subset.limited_by == "seconds"
    assert _shard_files(tmp_path / "cache") == {s.raw_data.basename for s in drawn[:2]}


def test_a_cache_limit_bounds_the_sample(three_days, tmp_path: Path) -> None:
    root, _ = three_days
    shard_set = ShardSet(root)
    new_bytes = sum(s.raw_data.bytes for s in select_subset(shard_set, 3, sample_rows=0).new)
    subset = select_subset(shard_set, 3, sample_rows=None, cache_limit=new_bytes + 1500)
    assert subset.limited_by == "cache_limit"
    assert sum(s.raw_data.bytes for s in subset.shards) <= new_bytes + 1500


def test_the_command(three_days, tmp_path: Path) -> None:
    root, _ = three_days
    ok = run(MDS, "check-loader", root, *"--version 3 --sample-rows 30 --seed 2 --workers 0 --batch-size 4".split())
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("OK: ") and lines[1].startswith("checked ")
    assert f"({ROWS_PER_DAY} rows) and" in lines[1] and "seed 2" in lines[1]
    as_json = run(MDS, "check-loader", root, "--version", "2", "--sample", "--workers", "0", "--json")
    checked = json.loads(as_json.stdout)["subset"]
    assert checked["sample_rows"] == 20_000 and checked["sampled_rows"] == ROWS_PER_DAY  # all of day 1 fits
    no_version = run(MDS, "check-loader", root, "--sample")
    assert no_version.returncode == 2 and "need --version" in no_version.stderr
    assert os.path.isdir(root)


def test_storage_options_reach_every_read_on_s3(s3_server, tmp_path: Path, monkeypatch) -> None:
    root = f"s3://{s3_server.new_bucket()}/set"
    shard_set = ShardSet(root)
    for day in range(2):
        _day(shard_set, day)
    # the environment now points nowhere: only the storage options know the endpoint
    monkeypatch.setenv("S3_ENDPOINT_URL", "http://127.0.0.1:9")
    options = {"endpoint_url": s3_server.endpoint}
    report = _check(root, tmp_path, 2, local=None, storage_options=options, sample_rows=40, num_workers=2)
    assert report.passed, report.problems
    assert report.subset["new_rows"] == ROWS_PER_DAY and 0 < report.subset["sampled_rows"] <= 40
    assert report.telemetry["totals"]["shards_downloaded"] == len(report.subset["new_shards"])


@pytest.mark.parametrize("bad", [{"seed": -1}, {"sample_rows": -5}, {"sample_seconds": -1.0}])
def test_bad_budgets_are_refused(three_days, bad: dict) -> None:
    with pytest.raises(ConfigurationError, match=next(iter(bad))):
        select_subset(ShardSet(three_days[0]), 3, **bad)
