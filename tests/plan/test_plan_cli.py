"""``mds plan`` as a new user meets it (issue 40): the loader's default order, unknowns in words, the probe's
measurements, sizes with units, and errors that name the field at fault."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mds_core.plan.plan as plan_module
from mds_core.errors import ConfigurationError
from mds_core.order.world import World, parse_world
from mds_core.plan import Environment, plan_training
from mds_core.plan.report import render_text
from mds_core.sizes import format_bytes
from tests.plan.support import S0, plan_text, refused, run_plan, shard_infos
from tests.streaming.support import rank_config, run_ranks

# Item 6: the plan's order is StreamingDataset's with the same arguments


@pytest.mark.parametrize(
    ("options", "dataset_kwargs"),
    [([], {}), (["--shuffle", "--shuffle-seed", "7"], {"shuffle": True, "shuffle_seed": 7})],
    ids=["defaults", "shuffled"],
)
def test_the_plans_order_is_the_loaders_with_the_same_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], dataset_kwargs: dict
) -> None:
    from mds_core.order import generate_work  # what the planner calls (it imports it from there)

    planned: list[np.ndarray] = []

    def recording(*args, **kwargs):
        work = generate_work(*args, **kwargs)
        planned.append(work.copy())
        return work

    monkeypatch.setattr(plan_module, "generate_work", recording)
    plan_text(S0, "--world", "2x1x2", "--batch-size", "4", *options)
    [work] = planned  # (nodes, ranks per node, workers, batches, batch)
    outputs = run_ranks(
        tmp_path, 2, 1, rank_config(tmp_path, 4, 2, streams=[["s0", {}]], dataset_kwargs=dataset_kwargs)
    )
    workers, batches = work.shape[2], work.shape[3]
    for rank, out in enumerate(outputs):  # one rank per node: rank r is node r
        steps = [work[rank, 0, step % workers, step // workers] for step in range(workers * batches)]
        expected = [ids[ids >= 0].tolist() for ids in steps if (ids >= 0).any()]
        assert out["batches"] == expected
    ids = [i for out in outputs for batch in out["batches"] for i in batch]
    assert set(ids) == set(range(109))  # every sample of s0 (ranks' shares are padded to the same length)


def test_the_default_order_is_unshuffled_and_shuffle_says_so() -> None:
    assert "order: shuffle=False, " in plan_text(S0, "--batch-size", "4")
    shuffled = plan_text(S0, "--batch-size", "4", "--shuffle")
    assert re.search(r"^order: shuffle=True py1e, block [\d,]+, 1 canonical node\(s\)", shuffled, re.M)


# Item 5: without timing, the report says what is unknown and what gives it; no bare "-"


def test_without_timing_the_report_says_what_is_unknown_in_words() -> None:
    text = plan_text(S0, "--world", "2x1x2", "--batch-size", "4")
    assert (
        "first batch and waiting: unknown without timing (the link's speed and the training step). Pass --probe "
        "to measure this machine's link to the store, or --bandwidth and --latency; add --consume-time, your "
        "model's training seconds per sample. Known now: the bytes each node downloads before its first batch "
        "(the last column)."
    ) in text
    assert (
        "epoch 0: time not modelled\n  node  shards  downloaded  fetched again  peak cache  before first batch" in text
    )
    table = text[text.index("epoch 0:") : text.index("smallest cache_limit")]
    assert " - " not in table and not re.search(r" -$", table, re.M)


def test_the_bytes_before_the_first_batch_are_what_the_model_waits_for() -> None:
    """With no latency, the modelled first batch takes exactly those bytes at the link's rate."""
    world = World(num_nodes=2, ranks_per_node=2, workers_per_rank=2)
    orders: list[dict[str, Any]] = [{}, {"shuffle": True, "shuffle_block_size": 200}]
    for order in orders:
        plan = plan_training([shard_infos([50] * 16)], world, 5, environment=Environment(bandwidth=1e6), **order)
        for node in plan.epochs[0].nodes:
            assert node.first_batch_bytes and node.first_batch_seconds == pytest.approx(node.first_batch_bytes / 1e6)


def test_partial_timing_names_what_the_model_lacks() -> None:
    link_only = plan_text(S0, "--batch-size", "4", "--bandwidth", "100mb", "--latency", "0.02")
    assert "timing: link 100.0 MiB/s per node (given), latency 20.0 ms (given)\n" in link_only
    assert "  training time per sample unknown (--consume-time): steps run as fast as the data comes" in link_only
    training_only = plan_text(S0, "--batch-size", "4", "--consume-time", "0.001")
    assert "timing: no request latency, training 1.0 ms per sample (given)\n" in training_only
    assert "  link speed unknown (--bandwidth or --probe): downloads take only the latency" in training_only


# Item 8: --probe prints what it measured


def test_probe_prints_what_it_measured() -> None:
    text = plan_text(S0, "--batch-size", "4", "--probe")
    duration = r"[\d,.]+ (?:s|ms|µs)"
    assert re.search(
        rf"^probe, from this machine: startup {duration} \(a new storage client's first read, paid when the dataset "
        rf"reads its index; not in the model\), latency {duration}, bandwidth [\d,.]+ \w+/s, decode {duration} per "
        "sample$",
        text,
        re.M,
    ), text
    assert re.search(
        rf"^timing: link [\d,.]+ \w+/s per node \(measured\), latency {duration} \(measured\), decode {duration} "
        r"per sample \(measured\)$",
        text,
        re.M,
    ), text
    given = plan_text(S0, "--batch-size", "4", "--probe", "--bandwidth", "100mb")
    assert "timing: link 100.0 MiB/s per node (given), latency" in given
    data = json.loads(run_plan(S0, "--batch-size", "4", "--probe", "--json").stdout)
    assert set(data["settings"]["probe"]) >= {"startup_seconds", "latency", "bandwidth", "decode_seconds"}


# Item 7: sizes need a unit, and a limit the loader refuses is never "enough"


@pytest.mark.parametrize(
    ("option", "value"), [("--cache-limit", "5"), ("--cache-limit", "512"), ("--bandwidth", "100")]
)
def test_a_bare_small_number_is_refused_with_the_unit_to_give(option: str, value: str) -> None:
    out = refused(S0, "--batch-size", "4", option, value)
    size = int(value)
    assert out == (
        f"error: {option} {value}: a number without a unit is bytes, and {size:,} byte(s) cannot be meant; "
        f"give the unit, e.g. {option} {value}gb (kb, mb, gb, tb: powers of 1024)\n"
    )


@pytest.mark.parametrize(
    ("value", "size"),
    [("5gb", 5 << 30), ("5GiB", 5 << 30), ("512mb", 512 << 20), ("64.0 MiB", 64 << 20), ("1048576", 1 << 20)],
)
def test_sizes_with_a_unit_or_of_a_mebibyte_and_more_are_taken(value: str, size: int) -> None:
    """Units are powers of 1024, spelt either way: ``64.0 MiB`` is how the report writes a size."""
    data = json.loads(plan_text(S0, "--batch-size", "4", "--cache-limit", value, "--json"))
    assert data["settings"]["cache_limit"] == size


def test_a_limit_the_loader_refuses_is_too_small_never_enough() -> None:
    """Between the replay's smallest limit and the loader's minimum: the old report said both "is enough" and
    "StreamingDataset refuses"."""
    shards, world = shard_infos([50] * 10), World(ranks_per_node=2)
    loader_minimum = plan_training([shards], world, 5).settings["loader_minimum_cache_limit"]
    limit = loader_minimum - 5000
    plan = plan_training([shards], world, 5, predownload=5, cache_limit=limit)
    assert plan.smallest_cache_limit < limit and plan.refetched_shards == 0
    text = render_text(plan)
    [line] = [line for line in text.splitlines() if line.startswith("  cache_limit = ")]
    given = format_bytes(limit)
    assert "enough" not in line and line.count(format_bytes(loader_minimum)) == 1
    assert f"cache_limit={given} is too small: StreamingDataset refuses a limit under its minimum" in line
    assert "A lower limit" not in line and line.endswith("StreamingDataset accepts no lower limit for this order.")


def test_a_limit_no_block_can_fit_recommends_no_block() -> None:
    text = plan_text(S0, "--batch-size", "4", "--shuffle", "--cache-limit", "5b")
    assert (
        "  shuffle_block_size: no block makes cache_limit=5 B enough: even the smallest leaves each of the node's "
        "readers two shards at once, more than that holds. Raise cache_limit.\n"
    ) in text
    assert "shuffle_block_size = " not in text and "is enough" not in text


def test_a_smaller_block_is_one_the_loader_accepts() -> None:
    shards, world = shard_infos([50] * 40), World(num_nodes=1, ranks_per_node=2, workers_per_rank=1)
    order: dict[str, Any] = {"shuffle": True, "shuffle_block_size": 1000}
    full = plan_training([shards], world, 5, **order)
    limit = (full.settings["loader_minimum_cache_limit"] + 3 * 5000) // 2
    plan = plan_training([shards], world, 5, cache_limit=limit, **order)
    [block] = [r for r in plan.recommendations if r.setting == "shuffle_block_size"]
    assert block.value is not None and 50 <= block.value < 1000  # at least a shard: not a block of 1
    smaller = plan_training([shards], world, 5, cache_limit=limit, **{**order, "shuffle_block_size": block.value})
    assert smaller.settings["loader_minimum_cache_limit"] <= limit


# Item 9: errors name the field, and the command line's options


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--world", "2x8x0"],
            "world '2x8x0': workers per rank is 0, must be at least 1 (NODESxRANKSxWORKERS). DataLoader(num_workers=0) "
            "reads in the rank process, in the order of one worker: plan it as 2x8x1",
        ),
        (["--world", "0x8x4"], "world '0x8x4': nodes is 0, must be at least 1 (NODESxRANKSxWORKERS)"),
        (["--world", "2x0x4"], "world '2x0x4': ranks per node is 0, must be at least 1 (NODESxRANKSxWORKERS)"),
        (["--world", "0x8"], "world '0x8': nodes is 0, must be at least 1 (NODESxRANKS)"),
        (
            ["--world", "2x8x4x1"],
            "world '2x8x4x1' must look like NODESxRANKS or NODESxRANKSxWORKERS, e.g. 2x4 or 2x4x2",
        ),
        (
            ["--batch-size", "0"],
            "--batch-size must be a positive integer (the per-device batch size, the same as the DataLoader's), got 0",
        ),
        (["--epochs", "0"], "--epochs must be at least 1, got 0"),
        (["--world", "2xfoo"], "world '2xfoo' must look like NODESxRANKS or NODESxRANKSxWORKERS, e.g. 2x4 or 2x4x2"),
        (
            ["--cache-limit", "lots"],
            "--cache-limit: Unsupported value/suffix 'lots': a size is bytes or a number with a suffix ['b', 'eb', "
            "'gb', 'kb', 'mb', 'pb', 'tb', 'yb', 'zb'], e.g. '64mb'",
        ),
        (["--shuffle-algo", "nope"], "invalid shuffle_algo 'nope': use one of naive, py1br, py1e, py1s, py2s"),
    ],
)
def test_errors_name_the_field_and_the_option(args: list[str], message: str) -> None:
    assert refused(S0, "--batch-size", "4", *args) == f"error: {message}\n"


def test_check_order_still_reads_zero_workers_as_the_rank_process() -> None:
    assert parse_world("2x8x0") == World(num_nodes=2, ranks_per_node=8, workers_per_rank=1)
    with pytest.raises(ConfigurationError, match="nodes is 0, must be at least 1"):
        parse_world("0x8x4")
