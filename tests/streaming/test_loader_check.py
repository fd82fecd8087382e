"""check_loader and `mds check-loader`: a real StreamingDataLoader reads every sample once and resumes exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mds_core.streaming.loader import StreamingDataLoader
from mds_core.streaming.loader_check import _IdTaggedDataset, _run, check_loader
from mds_core.versions import ShardSet
from tests.streaming.support import MDS, run, write_rows


def _write(out: Path | str, count: int) -> str:
    rows = ({"id": i, "text": f"sample {i}"} for i in range(count))
    return str(write_rows(out, {"id": "int", "text": "str"}, rows, size_limit=600))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_good_dataset_passes(tmp_path: Path, num_workers: int) -> None:
    local = _write(tmp_path / "d", 90)
    report = check_loader(local=local, batch_size=8, num_workers=num_workers, job_root=str(tmp_path))
    assert report.passed, report.problems
    assert report.samples_streamed == report.distinct == report.samples_expected == 90
    assert report.exactly_once and report.continuation_matches
    assert report.resumed_at_sample == 48  # checkpointed after 6 of the loader's 12 batches of 8
    assert report.samples_per_second > 0 and report.to_json()["passed"] is True


def test_a_sample_streamed_twice_fails_the_check(tmp_path: Path) -> None:
    # An epoch of 40 over 30 samples repeats 10 of them: as many samples as expected, not each once.
    local, job_root = _write(tmp_path / "d", 30), str(tmp_path)
    report = check_loader(
        local=local, batch_size=4, num_workers=0, samples_expected=40, epoch_size=40, job_root=job_root
    )
    assert report.samples_streamed == 40 and report.distinct == 30
    assert not report.exactly_once and not report.passed and report.continuation_matches
    assert report.problems == ["streamed 40 samples (30 distinct), expected each of 40 exactly once"]


def test_failures_are_reported_not_raised(tmp_path: Path) -> None:
    options: dict[str, Any] = {"samples_expected": 31, "min_samples_per_second": 1e12, "job_root": str(tmp_path)}
    report = check_loader(local=_write(tmp_path / "d", 30), batch_size=4, num_workers=0, **options)
    assert not report.passed and not report.exactly_once and report.continuation_matches
    assert report.problems == [
        "streamed 30 samples (30 distinct), expected each of 31 exactly once",
        f"throughput {report.samples_per_second:.0f} samples/s is below the required 1000000000000 samples/s",
    ]


class _ForgetsItsPlace(_IdTaggedDataset):
    """A dataset whose resume is broken: it ignores the state and starts the epoch over."""

    def load_state_dict(self, obj: dict, allow_other_data: bool = False) -> None:
        pass


def test_a_resume_that_does_not_continue_fails_the_check(tmp_path: Path) -> None:
    local = _write(tmp_path / "d", 90)

    def make() -> StreamingDataLoader:
        dataset = _ForgetsItsPlace(local=local, batch_size=8, shuffle=True, job_root=str(tmp_path))
        return StreamingDataLoader(dataset, batch_size=8)

    report = _run(make, local, None, 8, 0, None, 0.0)
    assert report.exactly_once and not report.continuation_matches and not report.passed
    assert report.problems == [
        "resuming at sample 48 gave 90 samples that differ from the uninterrupted epoch's remainder"
    ]


def test_a_version_of_a_remote_shard_set_through_a_temporary_cache(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    for count in (20, 15):
        with shard_set.transaction("append") as tx:
            _write(tx.out, count)
    report = check_loader(remote=str(tmp_path / "set"), version=1, batch_size=4, num_workers=0, job_root=str(tmp_path))
    assert report.passed and report.samples_streamed == 20 and report.version == 1


def test_the_command(tmp_path: Path) -> None:
    local = _write(tmp_path / "d", 50)
    ok = run(MDS, "check-loader", local, "--batch-size", "5", "--workers", "2")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(
        "OK: 50 samples streamed by 2 worker(s) (50 distinct, 50 expected), resumed at sample 25: continuation matches"
    )
    assert json.loads(run(MDS, "check-loader", local, "--workers", "0", "--json").stdout)["exactly_once"] is True
    slow = run(MDS, "check-loader", local, "--workers", "0", "--min-samples-per-second", "1e12")
    assert slow.returncode == 1 and slow.stdout.startswith("FAIL throughput")  # the cause, then the verdict
    assert slow.stdout.splitlines()[1].startswith("FAILED (1 problem): 50 samples streamed")
    missing = run(MDS, "check-loader", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope/index.json" in missing.stderr


def test_python_dash_m_runs_every_subcommand(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path / "set"))
    with shard_set.transaction("overwrite") as tx:
        _write(tx.out, 10)
    listed = run(sys.executable, "-m", "mds_core.cli", "versions", "list", str(tmp_path / "set"), timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("*    1 ") and "10 rows" in listed.stdout
