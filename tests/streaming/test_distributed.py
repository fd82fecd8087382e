"""Several real rank processes (torch.distributed over gloo on 127.0.0.1), as torchrun would start them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.streaming.support import ORDER
from testsupport.fault_proxy import free_port

WORKER = Path(__file__).with_name("distributed_worker.py")
EPOCHS = json.loads((ORDER / "epochs.json").read_text())["cases"]


def _run_ranks(tmp_path: Path, num_ranks: int, ranks_per_node: int, config: dict) -> list[dict]:
    """Start every rank as its own process and return each rank's output."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    port, procs, outs = free_port(), [], []
    for rank in range(num_ranks):
        config_path, out = tmp_path / f"config{rank}.json", tmp_path / f"out{rank}-{port}.json"
        config_path.write_text(json.dumps(config))
        world = {"RANK": rank, "WORLD_SIZE": num_ranks, "LOCAL_RANK": rank % ranks_per_node}
        world.update(LOCAL_WORLD_SIZE=ranks_per_node, MASTER_PORT=port)
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", **{name: str(value) for name, value in world.items()}}
        command = [sys.executable, str(WORKER), str(config_path), str(out)]
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(out)
    logs = [proc.communicate(timeout=300)[0] for proc in procs]
    # Every rank's log: the rank that fails first is usually not the one that reports the failure.
    assert [proc.returncode for proc in procs] == [0] * num_ranks, "\n".join(
        f"--- rank {rank} ---\n{log[-3000:]}" for rank, log in enumerate(logs)
    )
    return [json.loads(out.read_text()) for out in outs]


def _config(tmp_path: Path, batch_size: int, num_workers: int, **extra) -> dict:
    return {
        "streams": [["s0", {}], ["s1", {}], ["s2", {}]],
        "batch_size": batch_size,
        "num_workers": num_workers,
        "job_root": str(tmp_path / "jobs"),
        "dataset_kwargs": {"shuffle": True, "num_canonical_nodes": 2},
        **extra,
    }


def _global_batches(outputs: list[dict]) -> list[list[int]]:
    """Step t's global batch: every rank's t-th batch, in rank order."""
    steps = max(len(o["batches"]) for o in outputs)
    return [sum((o["batches"][t] for o in outputs if t < len(o["batches"])), []) for t in range(steps)]


TWO_NODE_CASE = next(
    c for c in EPOCHS if c["world"] == {"num_nodes": 2, "ranks_per_node": 1, "workers_per_rank": 1} and "error" not in c
)


def test_two_nodes_get_the_reference_rows(tmp_path: Path) -> None:
    case, kwargs = TWO_NODE_CASE, TWO_NODE_CASE["dataset_kwargs"]
    streams = [[s["name"], {k: v for k, v in s.items() if k != "name"}] for s in case["streams"]]
    state = {"epoch": case["epoch"], "sample_in_epoch": case["sample_in_epoch"], "initial_physical_nodes": 2}
    state.update(num_canonical_nodes=kwargs["num_canonical_nodes"], shuffle_seed=kwargs["shuffle_seed"])
    config = _config(tmp_path, case["batch_size"], 0, streams=streams, dataset_kwargs=kwargs, state=state)
    outputs = _run_ranks(tmp_path, 2, 1, config)  # LOCAL_WORLD_SIZE=1: each rank is its own node
    work = np.array(case["ids"]).reshape(case["shape"])
    for node, output in enumerate(outputs):
        row = work[node, 0, 0].ravel()
        assert sum(output["batches"], []) == row[row >= 0].tolist()


def test_two_ranks_with_workers_see_every_sample_once_in_the_single_rank_batches(tmp_path: Path) -> None:
    single = _run_ranks(tmp_path / "one", 1, 1, _config(tmp_path / "one", 8, 0))
    double = _run_ranks(tmp_path / "two", 2, 2, _config(tmp_path / "two", 4, 2))
    ids = sum(_global_batches(double), [])
    assert sorted(ids) == list(range(420))  # 420 = 2 ranks x 4 x 52 + 4 tail... every sample exactly once
    for mine, theirs in zip(_global_batches(double), _global_batches(single)):
        assert Counter(mine) == Counter(theirs)  # elastic: same global batches for any world


def test_resume_on_a_different_number_of_ranks(tmp_path: Path) -> None:
    full = _global_batches(_run_ranks(tmp_path / "full", 2, 2, _config(tmp_path / "full", 4, 1)))
    first = _run_ranks(tmp_path / "a", 2, 2, _config(tmp_path / "a", 4, 1, stop_after=9))
    state = first[0]["state"]
    assert state["sample_in_epoch"] == 9 * 8 and first[1]["state"] == state
    rest = _global_batches(_run_ranks(tmp_path / "b", 1, 1, _config(tmp_path / "b", 8, 2, state=state)))
    assert [Counter(b) for b in _global_batches(first) + rest] == [Counter(b) for b in full]


@pytest.mark.slow  # 4 multi-process runs (21 s); test_resume_on_a_different_number_of_ranks keeps 2 -> 1 in make test
def test_state_from_2_ranks_resumes_on_1_and_on_4_ranks_exactly_once(tmp_path: Path) -> None:
    def config(where: str, batch_size: int, workers: int, **extra) -> dict:
        base = _config(tmp_path / where, batch_size, workers, **extra)
        base["dataset_kwargs"]["epoch_size"] = 416  # divisible by every global layout below: no padding
        return base

    full = _global_batches(_run_ranks(tmp_path / "full", 2, 2, config("full", 4, 2)))
    assert sorted(sum(full, [])) == sorted(set(sum(full, []))) and len(sum(full, [])) == 416
    step = int(np.random.default_rng(7).integers(1, len(full) - 1))
    first = _run_ranks(tmp_path / "first", 2, 2, config("first", 4, 2, stop_after=step))
    state = first[0]["state"]
    for ranks, batch_size, workers in ((1, 8, 2), (4, 2, 0)):
        where = f"rest{ranks}"
        rest = _global_batches(
            _run_ranks(tmp_path / where, ranks, ranks, config(where, batch_size, workers, state=state))
        )
        combined = _global_batches(first) + rest
        assert [Counter(b) for b in combined] == [Counter(b) for b in full], f"resumed on {ranks} ranks"
        assert sorted(sum(combined, [])) == sorted(sum(full, []))  # the union covers the epoch exactly once
