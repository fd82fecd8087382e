"""Write tests/fixtures/order-golden with the reference: shuffles, partitions, whole epochs and resumptions.

Runs in benchmarks/.venv. The inputs are tools/golden/order_cases.json; each output case is its input with
the reference's answer appended (or ``error``/``message`` where the reference raised). Worlds of several
nodes, ranks and workers need no real job: the reference's ``generate_work`` takes the ``World`` as an
argument, and with ``World(nodes, ranks_per_node, workers_per_rank, worker=0)`` it returns the whole
epoch's array, for every node, rank and worker, exactly as the local leader of a real job computes it.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import streaming
from streaming import MDSWriter, Stream, StreamingDataLoader, StreamingDataset
from streaming.base.batching import generate_work
from streaming.base.partition import get_partitions
from streaming.base.shuffle import get_shuffle
from streaming.base.util import merge_index
from streaming.base.world import World

CASES_FILE = Path(__file__).with_name("order_cases.json")
MESSAGE_CHARS = 200  # error messages are cut here: some of the reference's run on for paragraphs
EPOCH1_BATCHES = 2  # batches of epoch 1 recorded after a resumed epoch 0
DATASETS_PER_PROCESS = 24  # see _in_fresh_processes


def quiet() -> None:
    """The reference's advisory warnings and logs (small test datasets trigger many) would bury the report."""
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")


def load_cases() -> dict[str, Any]:
    return json.loads(CASES_FILE.read_text())


def _version() -> str:
    return f"mosaicml-streaming {streaming.__version__}"


def _outcome(compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The reference's answer, or the error it raised (class name and the start of its message)."""
    try:
        return compute()
    except Exception as err:  # any error the reference raises is part of what it does
        return {"error": type(err).__name__, "message": str(err)[:MESSAGE_CHARS]}


def _array(ids: np.ndarray) -> dict[str, Any]:
    return {"shape": list(ids.shape), "ids": ids.ravel().tolist()}


def write_streams(datasets: Path, shard_sizes: dict[str, list[int]]) -> None:
    """One MDS dataset per stream, column ``id`` = the global sample id (streams in order, shards in order).

    Each shard is the only shard of its own writer (size_limit=None), in p00, p01, ..., merged with
    merge_index: shard sizes are then exactly the ones asked for.
    """
    first = 0
    for name, sizes in shard_sizes.items():
        for part, size in enumerate(sizes):
            with MDSWriter(out=str(datasets / name / f"p{part:02d}"), columns={"id": "int"}, size_limit=None) as w:
                for sample_id in range(first, first + size):
                    w.write({"id": sample_id})
            first += size
        merge_index(str(datasets / name))


def shuffle_case(case: dict[str, Any]) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        sizes = np.array(case["shard_sizes"], np.int64)
        args = (case["num_canonical_nodes"], case["seed"], case["epoch"], case["block_size"])
        return {"perm": get_shuffle(case["algo"], sizes, *args).tolist()}

    return {**case, **_outcome(compute)}


def partition_case(case: dict[str, Any]) -> dict[str, Any]:
    return {**case, **_outcome(lambda: _array(get_partitions(**case)))}


def _streams(datasets: Path, case: dict[str, Any]) -> list[Stream]:
    return [
        Stream(local=str(datasets / s["name"]), **{k: v for k, v in s.items() if k != "name"}) for s in case["streams"]
    ]


def epoch_case(datasets: Path, case: dict[str, Any]) -> dict[str, Any]:
    """The whole epoch's sample ids for every node, rank and worker of a simulated world."""

    def compute() -> dict[str, Any]:
        dataset = StreamingDataset(
            streams=_streams(datasets, case), batch_size=case["batch_size"], **case["dataset_kwargs"]
        )
        world = World(**case["world"], worker=0)
        # As each worker does before generating work: apply the defaults that depend on the world.
        dataset._resume(world, case["epoch"])
        method = dataset.batching_method
        return _array(generate_work(method, dataset, world, case["epoch"], case["sample_in_epoch"]))

    return {**case, **_outcome(compute)}


def _in_fresh_processes(func: Callable[[dict[str, Any]], dict[str, Any]], cases: list[Any]) -> list[dict[str, Any]]:
    """``func`` over ``cases``, a new process every DATASETS_PER_PROCESS cases.

    Every StreamingDataset keeps its shared memory until its process exits, and each new one opens (and
    keeps open) every live segment while looking for a free prefix: file descriptors grow with the square
    of the datasets made in one process, past the limit within the epochs file. A spawned process exits
    through sys.exit, so the reference's atexit handlers free its segments.
    """
    pool = multiprocessing.get_context("spawn").Pool(1, quiet, maxtasksperchild=DATASETS_PER_PROCESS)
    try:
        return pool.map(func, cases, chunksize=1)
    finally:
        pool.close()  # not terminate(): a killed process would leave its segments behind
        pool.join()


def resume_case(datasets: Path, case: dict[str, Any]) -> dict[str, Any]:
    """One rank's epoch 0 through StreamingDataLoader, its state_dict after some batches, and epoch 1's start."""
    dataset = StreamingDataset(
        streams=_streams(datasets, case), batch_size=case["batch_size"], **case["dataset_kwargs"]
    )
    loader = StreamingDataLoader(dataset, batch_size=case["batch_size"], num_workers=case["num_workers"])
    epoch0, state = [], None
    for batch in loader:
        epoch0.append(batch["id"].tolist())
        if len(epoch0) == case["resume_after_batches"]:
            state = loader.state_dict()
    # The next iteration is the next epoch. It is read to its end: a loop left early leaves the reference's
    # prefetch threads (or workers) running, still locking files in the temp folder.
    epoch1 = [batch["id"].tolist() for batch in loader][:EPOCH1_BATCHES]
    return {**case, "state_dict": state, "epoch0_batches": epoch0, "epoch1_first_batches": epoch1}


def _dump(path: Path, obj: dict[str, Any], indent: int | None = None) -> None:
    path.write_text(json.dumps(obj, indent=indent))


def generate_order(out: Path, limit: int | None = None) -> None:
    """tests/fixtures/order-golden's layout under ``out``/order-golden; ``limit``: the first cases of each file."""
    golden = out / "order-golden"
    datasets = golden / "datasets"
    inputs = load_cases()
    cases = {name: inputs[name][:limit] for name in ("shuffle", "partition", "epochs", "resume")}
    write_streams(datasets, inputs["stream_shard_sizes"])
    shuffles = [shuffle_case(c) for c in cases["shuffle"]]
    _dump(golden / "shuffle.json", {"producer": f"{_version()} get_shuffle", "cases": shuffles})
    partitions = [partition_case(c) for c in cases["partition"]]
    _dump(golden / "partition.json", {"producer": f"{_version()} get_partitions", "cases": partitions})
    epochs = {
        "producer": f"{_version()} generate_work",
        "stream_shard_sizes": inputs["stream_shard_sizes"],
        "note": "sample ids are global: stream order s0,s1,s2, shards in index order; datasets/ holds the MDS data (column id = global id)",
        "cases": _in_fresh_processes(partial(epoch_case, datasets), cases["epochs"]),
    }
    _dump(golden / "epochs.json", epochs)
    resume = {
        "producer": f"{_version()} StreamingDataLoader.state_dict, one rank",
        "note": "load state_dict into a fresh dataset+loader with the same settings: the batches that follow must equal epoch0_batches[resume_after_batches:]",
        "cases": [resume_case(datasets, c) for c in cases["resume"]],
    }
    _dump(golden / "resume.json", resume, indent=0)
