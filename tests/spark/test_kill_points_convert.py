"""``dataframe_to_mds`` killed at every step of its driver's side: clearing the old output, then
committing the tasks' attempts. Real Spark tasks write the attempts; the commit, which runs on the
driver alone, then runs in a child process that dies at step k (``tests/crash``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mds_core import LocalDataset, dataframe_to_mds
from mds_core.convert import staging
from mds_core.format.index import INDEX_BASENAME
from mds_core.format.verify import verify_dataset
from tests.crash.harness import kill_at, steps_of

F = pytest.importorskip("pyspark.sql.functions")
OPTIONS = {"columns": {"id": "int64", "day": "str"}, "size_limit": 400, "hashes": ["xxh64"], "compression": None}
# The steps of clearing the old output, then of the driver's commit of 3 partitions, every one killed at
# (docs/remote-storage.md quotes them; tests/docs/test_figures.py checks the quote).
CONVERT_STEPS = (4, 6)


class _Stop(Exception):
    """Raised in place of the commit, to keep the attempts the tasks wrote."""


def _frame(spark, rows: int, partitions: int = 3):
    return spark.range(0, rows, numPartitions=partitions).select(
        F.col("id"), F.concat(F.lit("day-"), (F.col("id") / 10).cast("int").cast("string")).alias("day")
    )


def _ids(out: Path) -> list[int]:
    return sorted(int(sample["id"]) for sample in LocalDataset(str(out)))


def _check(out: Path, allowed: list[list[int]], killed) -> None:
    """(a) and (b): the output is either absent (no index) or one whole dataset that verifies."""
    if (out / INDEX_BASENAME).exists():
        assert _ids(out) in allowed, killed
        report = verify_dataset(str(out), decode=True)
        assert report.ok and report.hashes_checked > 0, (killed, report.problems)


def _retry(spark, out: Path, rows: int) -> None:
    """(c) and (d): the conversion run again replaces everything, staging of the killed run included."""
    dataframe_to_mds(_frame(spark, rows), mds_kwargs={**OPTIONS, "out": str(out), "exist_ok": True})
    assert _ids(out) == list(range(rows))
    assert not (out / staging.STAGING_DIR).exists()
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    indexed = {s.raw_data.basename for s in LocalDataset(str(out)).shards} | {INDEX_BASENAME}
    # Besides the shards and the merged index, only each partition's own index.json remains.
    assert names - indexed <= {f"{d}/{INDEX_BASENAME}" for d in ("00000", "00001", "00002")}, names - indexed


def test_a_conversion_killed_at_any_step_of_its_driver_side(spark, tmp_path: Path, monkeypatch) -> None:
    old_rows, new_rows = 20, 90
    pristine = tmp_path / "pristine"
    dataframe_to_mds(_frame(spark, old_rows), mds_kwargs={**OPTIONS, "out": str(pristine)})
    _check(pristine, [list(range(old_rows))], "setup")

    # Clearing the old output (exist_ok=True): the old index goes first.
    def prepared_copy(name: str) -> dict:
        shutil.copytree(pristine, tmp_path / name)
        return {"out": str(tmp_path / name)}

    prepare_steps = steps_of("convert_prepare", prepared_copy("listing-prepare"), tmp_path)
    for number in range(1, len(prepare_steps) + 1):
        args = prepared_copy(f"prepare-k{number}")
        killed = kill_at("convert_prepare", args, tmp_path, number)
        _check(Path(args["out"]), [list(range(old_rows))], killed)
    assert prepare_steps[0] == f"removed the old {INDEX_BASENAME}"

    # The commit: real tasks write their attempts; the commit is taken from the driver to a child.
    captured: dict = {}

    def capture(self, manifests, staging_dir, merge):
        captured.update(manifests=manifests, staging=staging_dir)
        raise _Stop

    monkeypatch.setattr(staging.Target, "commit", capture)
    with pytest.raises(_Stop):
        dataframe_to_mds(_frame(spark, new_rows), mds_kwargs={**OPTIONS, "out": str(pristine), "exist_ok": True})
    monkeypatch.undo()
    assert len(captured["manifests"]) == 3

    def committing_copy(name: str) -> dict:
        shutil.copytree(pristine, tmp_path / name)
        return {
            "out": str(tmp_path / name),
            "manifests": captured["manifests"],
            "staging": captured["staging"].replace(str(pristine), str(tmp_path / name)),
        }

    commit_steps = steps_of("convert_commit", committing_copy("listing-commit"), tmp_path)
    _check(tmp_path / "listing-commit", [list(range(new_rows))], "no kill")
    for number in range(1, len(commit_steps) + 1):
        args = committing_copy(f"commit-k{number}")
        killed = kill_at("convert_commit", args, tmp_path, number)
        _check(Path(args["out"]), [list(range(new_rows))], killed)
        _retry(spark, Path(args["out"]), new_rows)
    assert (len(prepare_steps), len(commit_steps)) == CONVERT_STEPS, (prepare_steps, commit_steps)
    assert sum(s.startswith("moved partition") for s in commit_steps) == 3, commit_steps
    assert commit_steps[-1] == f"renamed into place: {INDEX_BASENAME}", commit_steps
