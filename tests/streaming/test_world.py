from __future__ import annotations

import functools
import gc
from pathlib import Path

import pytest

from mds_core import StreamingDataLoader, StreamingDataset
from mds_core.errors import ConfigurationError
from mds_core.order.world import World
from mds_core.streaming.world import detect_world, rank_world, ranks_per_host
from tests.streaming.support import run_python, write_ids


def test_defaults_outside_torchrun_and_the_torchrun_environment() -> None:
    world = detect_world({})
    assert (world.num_nodes, world.ranks_per_node, world.rank, world.workers_per_rank) == (1, 1, 0, 1)
    assert world.is_local_leader
    world = detect_world({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    assert (world.num_nodes, world.ranks_per_node, world.node, world.rank_of_node) == (2, 4, 1, 1)
    assert not world.is_local_leader and world.num_ranks == 8


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "4"}, "must be a positive multiple"),
        ({"RANK": "8", "WORLD_SIZE": "8"}, "do not fit"),
        ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "node-contiguous"),
        ({"RANK": "x"}, "RANK='x' must be an integer"),
    ],
)
def test_inconsistent_environments_raise(env: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        detect_world(env)


@pytest.fixture
def process_group(tmp_path):
    """This test process as rank 0 of a real one-rank gloo group."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield dist
    dist.destroy_process_group()


def test_an_initialised_process_group_is_asked_before_the_environment(process_group) -> None:
    # As Lightning's launcher leaves it: LOCAL_RANK and WORLD_SIZE, no RANK, no LOCAL_WORLD_SIZE.
    assert rank_world({"WORLD_SIZE": "1", "LOCAL_RANK": "0"}) == World(num_nodes=1, ranks_per_node=1, rank=0)
    assert rank_world({}) == World()  # mp.spawn: nothing stated; the local world from the ranks' hosts
    with pytest.raises(
        ConfigurationError, match=r"WORLD_SIZE=2 in the environment, but torch.distributed's process group says 1"
    ):
        rank_world({"WORLD_SIZE": "2"})
    with pytest.raises(ConfigurationError, match=r"WORLD_SIZE=1 must be a positive multiple of LOCAL_WORLD_SIZE=2"):
        rank_world({"LOCAL_WORLD_SIZE": "2"})


@pytest.mark.parametrize(
    ("hosts", "per_node"), [(["a"], 1), (["a", "a", "b", "b"], 2), (["a", "b", "c"], 1), (["a"] * 8, 8)]
)
def test_ranks_per_host(hosts: list[str], per_node: int) -> None:
    assert ranks_per_host(hosts) == per_node


@pytest.mark.parametrize("hosts", [["a", "b", "a", "b"], ["a", "a", "b"], ["a", "a", "b", "b", "a", "a"]])
def test_ranks_not_contiguous_by_host_are_refused(hosts: list[str]) -> None:
    with pytest.raises(ConfigurationError, match=r"not node-contiguous .* set LOCAL_WORLD_SIZE"):
        ranks_per_host(hosts)


def test_replication_builds_the_parallel_world() -> None:
    world = World(num_nodes=2, ranks_per_node=4, rank=5)
    assert world.replicate(None) is world
    assert world.replicate(2) == World(num_nodes=1, ranks_per_node=4, rank=2)
    assert world.replicate(8) == World(num_nodes=1, ranks_per_node=1, rank=0)
    assert World(num_nodes=4, ranks_per_node=2, rank=7).replicate(2) == World(num_nodes=2, ranks_per_node=2, rank=3)
    assert World(num_nodes=1, ranks_per_node=6, rank=5).replicate(2) == World(num_nodes=1, ranks_per_node=3, rank=2)
    with pytest.raises(ConfigurationError, match=r"8 ranks are not divisible by replication=3"):
        world.replicate(3)


def _loader(tmp_path: Path, samples: int, **kwargs) -> StreamingDataLoader:
    data = write_ids(tmp_path / "d", samples)
    dataset = StreamingDataset(local=str(data), batch_size=4, job_root=str(tmp_path / "jobs"))
    return StreamingDataLoader(dataset, batch_size=4, **kwargs)


def _freeze_count(batch: list) -> dict:
    """A collate that reports, from inside the process that made the batch, how many objects gc froze."""
    return {"frozen": [gc.get_freeze_count()] * len(batch)}


@pytest.mark.parametrize("num_workers", [0, 1])
def test_only_a_dataloader_worker_freezes_what_it_inherited(tmp_path: Path, num_workers: int) -> None:
    loader = _loader(tmp_path, 8, num_workers=num_workers, collate_fn=_freeze_count)
    counts = [batch["frozen"][0] for batch in loader]
    assert len(counts) == 2
    if num_workers:  # the worker froze its inherited heap before its first sample
        assert all(count > 1000 for count in counts)
    else:  # the training process itself is left alone
        assert counts == [0, 0] and gc.get_freeze_count() == 0


def _freeze_count_then_thaw(batch: list) -> dict:
    """As ``_freeze_count``, then unfreeze: a later check for frozen objects would freeze them again."""
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    return {"frozen": [frozen] * len(batch)}


def test_a_persistent_worker_checks_its_heap_once_not_every_epoch(tmp_path: Path) -> None:
    # gc.get_freeze_count walks every frozen object (~24 ms once torch's heap is frozen): a persistent
    # worker must not pay it again at each epoch's start.
    loader = _loader(tmp_path, 4, num_workers=1, collate_fn=_freeze_count_then_thaw)
    assert loader.persistent_workers
    first, second = ([batch["frozen"][0] for batch in loader] for _ in range(2))
    assert first[0] > 1000 and second == [0]


def _record_frozen_at_start(path: Path, worker_id: int) -> None:
    """A ``worker_init_fn``: what the worker finds frozen before torch hands it its first index."""
    (path / f"worker{worker_id}").write_text(str(gc.get_freeze_count()))


def test_workers_fork_from_a_frozen_heap_and_the_parent_thaws_after(tmp_path: Path) -> None:
    # Before its dataset runs, a worker's own collections must not walk the heap it inherited: where the counters
    # stood near a full collection, that walk copied every inherited page (0.55 GiB on a node of 8 x 2 processes).
    init = functools.partial(_record_frozen_at_start, tmp_path)
    loader = _loader(tmp_path, 16, num_workers=2, worker_init_fn=init)
    assert len(list(loader)) == 4
    assert [int((tmp_path / f"worker{i}").read_text()) > 1000 for i in range(2)] == [True, True]
    assert gc.get_freeze_count() == 0  # the training process collects its objects as before


def test_a_heap_the_training_process_froze_itself_stays_frozen(tmp_path: Path) -> None:
    loader = _loader(tmp_path, 8, num_workers=1)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert len(list(loader)) == 2
        assert gc.get_freeze_count() > frozen // 2  # (frozen objects that die leave it): not thawed to 0
    finally:
        gc.unfreeze()


def test_the_training_process_has_numpy_random_before_its_workers_fork() -> None:
    # torch's worker set-up seeds numpy's global generator: where the parent had not imported numpy.random, each
    # DataLoader worker imported it into 3.8 MiB of its own pages (0.06 GiB over a node of 8 ranks x 2 workers).
    done = run_python("import sys; from mds_core import StreamingDataset; print('numpy.random' in sys.modules)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


def test_reading_imports_neither_the_writer_nor_versioned_shard_sets() -> None:
    # 14 ms of a training script's start (0.11 against 0.124 s for `from mds_core import StreamingDataset`).
    code = "import sys; from mds_core import StreamingDataset; print(sorted(m for m in sys.modules if m.startswith(("
    code += "'mds_core.writer', 'mds_core.versions'))))"
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert (
        run_python("from mds_core import MDSWriter, merge_index; print(MDSWriter.__name__)").stdout.strip()
        == "MDSWriter"
    )
