"""README.md's tour, run as written: the loader's state taken at step 10 resumes with step 11's batch, and the
tour runs again (the comments' printed lines hold both times)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme_walk import block_under


def test_the_tours_resumed_batch_is_step_11s_and_the_tour_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mds_core import StreamingDataLoader, StreamingDataset

    monkeypatch.chdir(tmp_path)  # the tour writes data/demo and data/sets/demo under the current directory
    monkeypatch.setenv("MDS_JOB_ROOT", str(tmp_path / "jobs"))
    tour = compile(block_under("A tour", "python"), "README.md (A tour)", "exec")
    first: dict = {}
    exec(tour, first)
    assert first["state"]["sample_in_epoch"] == 352 == 11 * 32  # as its comment says
    dataset = StreamingDataset(local="data/demo", batch_size=32, shuffle=True)  # the tour's, uninterrupted
    uninterrupted = [batch["id"].tolist() for _, batch in zip(range(12), StreamingDataLoader(dataset, batch_size=32))]
    assert first["resumed"]["id"].tolist() == uninterrupted[11]
    # A second run replaces data/demo (``exist_ok=True``) and appends a second version to the shard set.
    with pytest.warns(UserWarning, match="exist_ok=True: removing the existing contents of data/demo"):
        exec(tour, {})
    assert capsys.readouterr().out == "doc 7\n1 [1]\ndoc 7\n2 [1, 2]\n"
