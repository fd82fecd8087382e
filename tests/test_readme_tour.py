"""README.md's tour, run as written: the loader's state taken at step 10 resumes with step 11's batch, and the
tour runs again (the comments' printed lines hold both times)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_python(section: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n## {section}\n")
    block = re.search(r"```python\n(.*?)```", text[start:], re.DOTALL)
    assert block, f"README.md: no python block under '## {section}'"
    return block.group(1)


def test_the_tours_resumed_batch_is_step_11s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mds_core import StreamingDataLoader, StreamingDataset

    monkeypatch.chdir(tmp_path)  # the tour writes data/demo and data/sets/demo under the current directory
    monkeypatch.setenv("MDS_JOB_ROOT", str(tmp_path / "jobs"))
    tour: dict = {}
    exec(compile(readme_python("A tour"), "README.md (A tour)", "exec"), tour)
    assert tour["state"]["sample_in_epoch"] == 352 == 11 * 32  # as its comment says
    dataset = StreamingDataset(local="data/demo", batch_size=32, shuffle=True)  # the tour's, uninterrupted
    uninterrupted = [batch["id"].tolist() for _, batch in zip(range(12), StreamingDataLoader(dataset, batch_size=32))]
    assert tour["resumed"]["id"].tolist() == uninterrupted[11]


def test_the_tour_runs_again_as_its_comments_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run replaces data/demo (``exist_ok=True``) and appends a second version to the shard set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MDS_JOB_ROOT", str(tmp_path / "jobs"))
    tour = compile(readme_python("A tour"), "README.md (A tour)", "exec")
    exec(tour, {})
    with pytest.warns(UserWarning, match="exist_ok=True: removing the existing contents of data/demo"):
        exec(tour, {})
    assert capsys.readouterr().out == "doc 7\n1 [1]\ndoc 7\n2 [1, 2]\n"
