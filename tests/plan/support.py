"""Shared by the planner's tests: index entries without files, and ``mds plan`` run in-process."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from mds_core.cli import main
from mds_core.format.index import FileInfo, ShardInfo

DATASETS = Path(__file__).resolve().parents[1] / "fixtures" / "order-golden" / "datasets"
S0, S1 = str(DATASETS / "s0"), str(DATASETS / "s1")


def shard_infos(sizes: list[int], bytes_per_sample: int = 100) -> list[ShardInfo]:
    """One stream's index entries: shard ``i`` holds ``sizes[i]`` samples of ``bytes_per_sample`` bytes."""
    return [
        ShardInfo(
            ["x"], ["bytes"], [None], None, [], FileInfo(f"shard.{i:05}.mds", n * bytes_per_sample), n, None, None
        )
        for i, n in enumerate(sizes)
    ]


def run_plan(*args: str, exit_code: int = 0) -> Result:
    """``mds plan ARGS``, which must exit with ``exit_code`` (2: refused, with a message)."""
    result = CliRunner().invoke(main, ["plan", *args])
    assert result.exit_code == exit_code, result.output
    return result


def plan_text(*args: str) -> str:
    """What ``mds plan ARGS`` prints when it succeeds."""
    return run_plan(*args).output


def refused(*args: str) -> str:
    """What ``mds plan ARGS`` prints when it refuses the arguments."""
    return run_plan(*args, exit_code=2).output
