"""check_order and `mds check-order`: same global batches across worlds and resume points, or the first difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from mds_core.errors import MDSError
from mds_core.order.simulate import check_order
from mds_core.order.spec import OrderSpec
from mds_core.order.world import World, parse_world
from tests.streaming.support import MDS, run

DATA = Path(__file__).resolve().parent.parent / "fixtures" / "order-golden" / "datasets"


def test_random_batching_is_elastic_across_worlds_and_resumes() -> None:
    spec = OrderSpec(shard_sizes=[[28, 7, 71, 3], [50, 50, 13, 137]], shuffle=True, num_canonical_nodes=4)
    worlds = [parse_world(w) for w in ("1x1", "1x4x2", "2x2", "4x1x3")]
    results = check_order(spec, worlds, global_batch=16, resume_fractions=(0.0, 0.3, 0.9))
    assert len(results) == 12 and all(r.ok for r in results), [r for r in results if not r.ok]
    assert results[0].batches_compared == -(-358 // 16) - 1  # all but the padded final batch


def test_a_difference_is_reported_with_its_batch() -> None:
    spec = OrderSpec(
        shard_sizes=[[109], [250]], shuffle=True, num_canonical_nodes=2, batching_method="device_per_stream"
    )
    results = check_order(
        spec, [World(num_nodes=1, ranks_per_node=2), World(num_nodes=2, ranks_per_node=2)], global_batch=8
    )
    bad = results[1]
    assert not bad.ok and bad.first_difference is not None
    batch, expected, got = bad.first_difference
    assert batch == 0 and sorted(expected) != sorted(got) and len(expected) == len(got) == 8


def test_incompatible_worlds_are_refused_not_crashed() -> None:
    spec = OrderSpec(shard_sizes=[[100]], num_canonical_nodes=2)
    result = check_order(
        spec, [World(num_nodes=1, ranks_per_node=1), World(num_nodes=3, ranks_per_node=1)], global_batch=8
    )[1]
    assert result.error and "not divisible by 3 ranks" in result.error


@pytest.mark.parametrize("text", ["2", "0x1", "axb", "1x1x-1"])
def test_bad_world_strings(text: str) -> None:
    with pytest.raises(MDSError, match="NODESxRANKS"):
        parse_world(text)


def test_cli_exit_codes_and_report() -> None:
    args = [str(DATA / "s0"), str(DATA / "s2"), "--global-batch", "8", "--num-canonical-nodes", "2"]
    ok = run(MDS, "check-order", *args, "--world", "1x1", "--world", "2x2x2")
    assert ok.returncode == 0 and ok.stdout.count("same") == 4
    bad = run(MDS, "check-order", *args, "--world", "1x2", "--world", "2x2", "--batching-method", "device_per_stream")
    assert bad.returncode == 1 and "DIFFERS  2 node(s) x 2 rank(s)" in bad.stdout and "global batch 0 has" in bad.stdout


def test_cli_checks_a_schedule_on_worlds_and_resume_points(tmp_path: Path) -> None:
    schedule = tmp_path / "schedule.json"
    schedule.write_text('{"phases": [{"start": 0, "weights": {"s0": 1}}, {"start": 3, "weights": {"s0": 1, "s2": 3}}]}')
    args = [str(DATA / "s0"), str(DATA / "s2"), "--global-batch", "12", "--schedule", str(schedule)]
    worlds = ["--world", "1x1", "--world", "1x4x2", "--world", "2x3x3", "--resume", "0", "--resume", "0.6"]
    ok = run(MDS, "check-order", *args, *worlds)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count("same") == 6 and "resumed at sample 0: 28 global batches" in ok.stdout  # 359 // 12 - 1
    schedule.write_text('{"phases": [{"start": 0, "weights": {"s1": 1}}]}')
    named = run(MDS, "check-order", *args)
    assert named.returncode != 0 and "the schedule names streams ['s1'] that the dataset lacks" in named.stderr
    plain = run(MDS, "check-order", *args[:4])
    assert plain.returncode != 0 and "--num-canonical-nodes is needed" in plain.stderr
