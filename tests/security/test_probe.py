"""Finding 1 of the review: ``mds plan --probe`` on a dataset with a ``pkl`` column ran the pickle."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mds_core import MDSWriter
from mds_core.cli import main


class Payload:
    """A value whose unpickling creates a file: the marker that the pickle ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))


def test_plan_probe_times_a_pkl_column_without_unpickling_it(tmp_path: Path) -> None:
    data, marker = tmp_path / "data", tmp_path / "pickle-ran"
    with MDSWriter(out=str(data), columns={"x": "pkl", "y": "int"}) as writer:
        for i in range(50):
            writer.write({"x": Payload(str(marker)), "y": i})
    args = ["plan", str(data), "--batch-size", "1", "--world", "1x1x1", "--probe", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    assert json.loads(result.output)["settings"]["environment"]["decode_seconds"] > 0
    # head and verify --decode gate the pickle the same way (the review found them sound)
    assert CliRunner().invoke(main, ["head", str(data)]).exit_code == 2
    assert CliRunner().invoke(main, ["verify", "--decode", str(data)]).exit_code == 0
    assert not marker.exists()
