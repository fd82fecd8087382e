"""``mds which`` and ``mds_core.plan.which``: the loader's own batches, from the indexes alone."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mds_core import StreamingDataLoader
from mds_core.cli import main
from mds_core.errors import SampleIndexError
from mds_core.order.spec import OrderSpec
from mds_core.order.world import World
from mds_core.plan.which import EpochOrder, Seen, Source, resumed, shard_sizes
from mds_core.versions import ShardSet
from tests.streaming.support import ORDER, batch_ids, run_ranks, three_streams, write_rows

STREAMS = [str(ORDER / "datasets" / name) for name in ("s0", "s1", "s2")]


def which(*args: str) -> dict:
    """``mds which ... --json``'s answer; the command must succeed."""
    result = CliRunner().invoke(main, ["which", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _loader_batches(tmp_path: Path, resume_at: int, **settings) -> tuple[list[list[int]], dict]:
    """The batches a real loader (2 DataLoader workers) yields when resumed at ``resume_at``, and its state."""
    dataset = three_streams(tmp_path / "jobs", **settings)
    state = {**dataset.state_dict(0, from_beginning=True), "epoch": 0, "sample_in_epoch": resume_at}
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    loader.load_state_dict(state)
    return batch_ids(loader), state


@pytest.mark.parametrize(
    ("settings", "options"),
    [({}, []), ({"shuffle": True, "num_canonical_nodes": 2, "shuffle_seed": 7}, ["--shuffle", "--shuffle-seed", "7"])],
    ids=["plain", "shuffled"],
)
def test_which_is_what_the_loader_yields_at_a_resume_point(tmp_path: Path, settings: dict, options: list) -> None:
    batches, state = _loader_batches(tmp_path, 40, **settings)
    (tmp_path / "state.json").write_text(json.dumps(state))
    spec = resumed(OrderSpec(shard_sizes=shard_sizes([Source(s) for s in STREAMS]), **settings), state)
    order = EpochOrder(spec, World(workers_per_rank=2), batch_size=4, sample_in_epoch=40)
    assert [order.batch(step) for step in range(order.steps)] == batches
    common = [*STREAMS, "--world", "1x1x2", "--batch-size", "4", "--state", str(tmp_path / "state.json"), *options]
    assert which(*common, "--step", "5")["samples"] == batches[5]
    sample = batches[7][2]
    seen = which(*common, "--sample", str(sample))["seen"]
    assert seen == [{"step": 7, "rank": 0, "worker": 1, "slot": 2}]
    assert which(*common, "--sample", str(sample))["seen"] == [vars(s) for s in order.steps_of(sample)]


def test_ranks_and_steps_of_a_multi_rank_world() -> None:
    spec = OrderSpec(shard_sizes=[[10] * 8])  # 80 samples, unshuffled
    order = EpochOrder(spec, World(num_nodes=2, ranks_per_node=2, workers_per_rank=2), batch_size=2)
    ranks = order.batch_by_rank(1)
    assert [len(r) for r in ranks] == [2, 2, 2, 2]
    assert order.batch(1) == sum(ranks, [])
    for rank, ids in enumerate(ranks):
        for slot, sample in enumerate(ids):
            assert Seen(step=1, rank=rank, worker=1, slot=slot) in order.steps_of(sample)
    seen = [found for sample in range(80) for found in order.steps_of(sample)]
    assert sorted((s.step, s.rank, s.slot) for s in seen) == [
        (step, rank, slot) for step in range(order.steps) for rank in range(4) for slot in range(2)
    ]


def test_the_answer_reads_no_shard(tmp_path: Path) -> None:
    for stream in STREAMS:
        shutil.copytree(stream, tmp_path / Path(stream).name)
    copies = [str(tmp_path / Path(stream).name) for stream in STREAMS]
    args = ["--world", "2x2x2", "--batch-size", "3", "--shuffle", "--num-canonical-nodes", "4"]
    before = which(*copies, *args, "--step", "4"), which(*copies, *args, "--sample", "300")
    for copy in copies:
        for shard in Path(copy).glob("shard.*"):
            shard.write_bytes(b"")  # every shard emptied: reading one would fail
    assert (which(*copies, *args, "--step", "4"), which(*copies, *args, "--sample", "300")) == before
    assert len(before[0]["samples"]) == 12


def test_key_values_read_only_the_shards_of_those_samples(tmp_path: Path) -> None:
    rows = ({"id": i, "key": f"row-{i:03d}"} for i in range(120))
    data = write_rows(tmp_path / "d", {"id": "int", "key": "str"}, rows, size_limit=1 << 10)
    args = [str(data), "--batch-size", "4", "--step", "2"]
    shards = json.loads((data / "index.json").read_text())["shards"]
    assert len(shards) > 3
    for shard in shards[1:]:  # step 2 reads samples 8-11: only the first shard holds them
        (data / shard["raw_data"]["basename"]).unlink()
    answer = which(*args, "--key", "key")
    assert answer["samples"] == [8, 9, 10, 11]
    assert answer["keys"] == {"8": "row-008", "9": "row-009", "10": "row-010", "11": "row-011"}
    text = CliRunner().invoke(main, ["which", *args, "--key", "key"]).output
    assert text.splitlines()[1] == "  rank 0: 8 (key='row-008') 9 (key='row-009') 10 (key='row-010') 11 (key='row-011')"


def test_a_pinned_version_is_read_from_its_own_index(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    for mode, count in (("overwrite", 40), ("append", 40)):
        with shard_set.transaction(mode) as tx:
            write_rows(tx.out, {"id": "int"}, ({"id": i} for i in range(count)), size_limit=1 << 10)
    one = which(root, "--batch-size", "4", "--version", "1", "--sample", "39")
    two = which(root, "--batch-size", "4", "--version", "2", "--sample", "79")
    assert (one["steps"], one["seen"][0]["step"]) == (10, 9)
    assert (two["steps"], two["seen"][0]["step"]) == (20, 19)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({**_state(8), "versions": [1]}))
    assert which(root, "--batch-size", "4", "--state", str(state), "--step", "0")["steps"] == 8


def _state(sample_in_epoch: int) -> dict:
    return {
        "epoch": 0,
        "sample_in_epoch": sample_in_epoch,
        "num_canonical_nodes": 1,
        "shuffle_seed": 9176,
        "initial_physical_nodes": 1,
    }


def test_human_output_names_the_step_and_where_a_sample_is_read() -> None:
    args = [STREAMS[0], "--world", "1x2", "--batch-size", "2", "--num-canonical-nodes", "1"]
    text = CliRunner().invoke(main, ["which", *args, "--step", "0"]).output
    assert text == "epoch 0 from sample 0, world 1x2x1, batch size 2: 28 steps; step 0:\n  rank 0: 0 2\n  rank 1: 1 3\n"
    text = CliRunner().invoke(main, ["which", *args, "--sample", "3"]).output
    assert text.splitlines()[1:] == ["  step 0: rank 1, worker 0, slot 1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step", "1", "--sample", "2"], "give one of --step (which samples are in that global batch) or --sample"),
        (["--step", "105"], "step 105 is beyond the epoch: 105 global batches of 4 follow sample 0 of epoch 0"),
        (["--sample", "420"], "sample id 420 is out of range for 420 samples"),
        (["--step", "0", "--version", "1", "--version", "2"], "2 version(s) for 3 source(s)"),
    ],
)
def test_bad_questions_are_refused_with_the_reason(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["which", *STREAMS, "--batch-size", "4", *args])
    assert result.exit_code != 0
    assert message in result.output


def test_a_step_beyond_the_epoch_raises() -> None:
    order = EpochOrder(OrderSpec(shard_sizes=[[10]]), World(), batch_size=4)
    with pytest.raises(SampleIndexError, match=re.escape("step 3 is beyond the epoch: 3 global batches of 4")):
        order.batch(3)


def test_which_names_the_ranks_of_real_rank_processes(tmp_path: Path) -> None:
    """Two ranks with two DataLoader workers each (torch.distributed on 127.0.0.1), shuffled, resumed at 32."""
    state = {**_state(32), "num_canonical_nodes": 2, "shuffle_seed": 7}
    settings: dict[str, Any] = {"shuffle": True, "shuffle_seed": 7}
    config = {
        "streams": [["s0", {}], ["s1", {}], ["s2", {}]],
        "batch_size": 4,
        "num_workers": 2,
        "job_root": str(tmp_path / "jobs"),
        "dataset_kwargs": settings,
        "state": state,
    }
    outputs = run_ranks(tmp_path, 2, 2, config)
    spec = resumed(OrderSpec(shard_sizes=shard_sizes([Source(s) for s in STREAMS]), **settings), state)
    order = EpochOrder(spec, World(ranks_per_node=2, workers_per_rank=2), batch_size=4, sample_in_epoch=32)
    assert [order.batch_by_rank(step) for step in range(order.steps)] == [
        [output["batches"][step] for output in outputs] for step in range(len(outputs[0]["batches"]))
    ]
