"""Several real rank processes (torch.distributed over gloo on 127.0.0.1), as torchrun would start them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.streaming.support import ORDER, global_batches, rank_config, run_ranks

EPOCHS = json.loads((ORDER / "epochs.json").read_text())["cases"]


TWO_NODE_CASE = next(
    c for c in EPOCHS if c["world"] == {"num_nodes": 2, "ranks_per_node": 1, "workers_per_rank": 1} and "error" not in c
)


def test_two_nodes_get_the_reference_rows(tmp_path: Path) -> None:
    case, kwargs = TWO_NODE_CASE, TWO_NODE_CASE["dataset_kwargs"]
    streams = [[s["name"], {k: v for k, v in s.items() if k != "name"}] for s in case["streams"]]
    state = {"epoch": case["epoch"], "sample_in_epoch": case["sample_in_epoch"], "initial_physical_nodes": 2}
    state.update(num_canonical_nodes=kwargs["num_canonical_nodes"], shuffle_seed=kwargs["shuffle_seed"])
    config = rank_config(tmp_path, case["batch_size"], 0, streams=streams, dataset_kwargs=kwargs, state=state)
    outputs = run_ranks(tmp_path, 2, 1, config)  # LOCAL_WORLD_SIZE=1: each rank is its own node
    work = np.array(case["ids"]).reshape(case["shape"])
    for node, output in enumerate(outputs):
        row = work[node, 0, 0].ravel()
        assert sum(output["batches"], []) == row[row >= 0].tolist()


def test_two_ranks_with_workers_see_every_sample_once_in_the_single_rank_batches(tmp_path: Path) -> None:
    single = run_ranks(tmp_path / "one", 1, 1, rank_config(tmp_path / "one", 8, 0))
    double = run_ranks(tmp_path / "two", 2, 2, rank_config(tmp_path / "two", 4, 2))
    ids = sum(global_batches(double), [])
    assert sorted(ids) == list(range(420))  # 420 = 2 ranks x 4 x 52 + 4 tail... every sample exactly once
    for mine, theirs in zip(global_batches(double), global_batches(single)):
        assert Counter(mine) == Counter(theirs)  # elastic: same global batches for any world


def test_resume_on_a_different_number_of_ranks(tmp_path: Path) -> None:
    full = global_batches(run_ranks(tmp_path / "full", 2, 2, rank_config(tmp_path / "full", 4, 1)))
    first = run_ranks(tmp_path / "a", 2, 2, rank_config(tmp_path / "a", 4, 1, stop_after=9))
    state = first[0]["state"]
    assert state["sample_in_epoch"] == 9 * 8 and first[1]["state"] == state
    rest = global_batches(run_ranks(tmp_path / "b", 1, 1, rank_config(tmp_path / "b", 8, 2, state=state)))
    assert [Counter(b) for b in global_batches(first) + rest] == [Counter(b) for b in full]


@pytest.mark.slow  # 4 multi-process runs (21 s); test_resume_on_a_different_number_of_ranks keeps 2 -> 1 in make test
def test_state_from_2_ranks_resumes_on_1_and_on_4_ranks_exactly_once(tmp_path: Path) -> None:
    def config(where: str, batch_size: int, workers: int, **extra) -> dict:
        base = rank_config(tmp_path / where, batch_size, workers, **extra)
        base["dataset_kwargs"]["epoch_size"] = 416  # divisible by every global layout below: no padding
        return base

    full = global_batches(run_ranks(tmp_path / "full", 2, 2, config("full", 4, 2)))
    assert sorted(sum(full, [])) == sorted(set(sum(full, []))) and len(sum(full, [])) == 416
    step = int(np.random.default_rng(7).integers(1, len(full) - 1))
    first = run_ranks(tmp_path / "first", 2, 2, config("first", 4, 2, stop_after=step))
    state = first[0]["state"]
    for ranks, batch_size, workers in ((1, 8, 2), (4, 2, 0)):
        where = f"rest{ranks}"
        rest = global_batches(
            run_ranks(tmp_path / where, ranks, ranks, config(where, batch_size, workers, state=state))
        )
        combined = global_batches(first) + rest
        assert [Counter(b) for b in combined] == [Counter(b) for b in full], f"resumed on {ranks} ranks"
        assert sorted(sum(combined, [])) == sorted(sum(full, []))  # the union covers the epoch exactly once
