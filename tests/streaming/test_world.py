from __future__ import annotations

import pytest

from mds_core.errors import ConfigurationError
from mds_core.order.world import World
from mds_core.streaming.world import detect_world


def test_defaults_outside_torchrun() -> None:
    world = detect_world({})
    assert (world.num_nodes, world.ranks_per_node, world.rank, world.workers_per_rank) == (1, 1, 0, 1)
    assert world.is_local_leader


def test_torchrun_environment() -> None:
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


def test_replication_builds_the_parallel_world() -> None:
    world = World(num_nodes=2, ranks_per_node=4, rank=5)
    assert world.replicate(None) is world
    assert world.replicate(2) == World(num_nodes=1, ranks_per_node=4, rank=2)
    assert world.replicate(8) == World(num_nodes=1, ranks_per_node=1, rank=0)
    assert World(num_nodes=4, ranks_per_node=2, rank=7).replicate(2) == World(num_nodes=2, ranks_per_node=2, rank=3)
    assert World(num_nodes=1, ranks_per_node=6, rank=5).replicate(2) == World(num_nodes=1, ranks_per_node=3, rank=2)
    with pytest.raises(ConfigurationError, match=r"8 ranks are not divisible by replication=3"):
        world.replicate(3)


def _freeze_count(batch: list) -> dict:
    """A collate that reports, from inside the process that made the batch, how many objects gc froze."""
    import gc

    return {"frozen": [gc.get_freeze_count()] * len(batch)}


@pytest.mark.parametrize("num_workers", [0, 1])
def test_only_a_dataloader_worker_freezes_what_it_inherited(tmp_path, num_workers: int) -> None:
    import gc

    from mds_core import MDSWriter, StreamingDataLoader, StreamingDataset

    with MDSWriter(out=str(tmp_path / "d"), columns={"id": "int"}) as writer:
        for i in range(8):
            writer.write({"id": i})
    dataset = StreamingDataset(local=str(tmp_path / "d"), batch_size=4, job_root=str(tmp_path / "jobs"))
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=num_workers, collate_fn=_freeze_count)
    counts = [batch["frozen"][0] for batch in loader]
    assert len(counts) == 2
    if num_workers:  # the worker froze its inherited heap before its first sample
        assert all(count > 1000 for count in counts)
    else:  # the training process itself is left alone
        assert counts == [0, 0] and gc.get_freeze_count() == 0


def _freeze_count_then_thaw(batch: list) -> dict:
    """As ``_freeze_count``, then unfreeze: a later check for frozen objects would freeze them again."""
    import gc

    frozen = gc.get_freeze_count()
    gc.unfreeze()
    return {"frozen": [frozen] * len(batch)}


def test_a_persistent_worker_checks_its_heap_once_not_every_epoch(tmp_path) -> None:
    # gc.get_freeze_count walks every frozen object (~24 ms once torch's heap is frozen): a persistent
    # worker must not pay it again at each epoch's start.
    from mds_core import MDSWriter, StreamingDataLoader, StreamingDataset

    with MDSWriter(out=str(tmp_path / "d"), columns={"id": "int"}) as writer:
        for i in range(4):
            writer.write({"id": i})
    dataset = StreamingDataset(local=str(tmp_path / "d"), batch_size=4, job_root=str(tmp_path / "jobs"))
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=1, collate_fn=_freeze_count_then_thaw)
    assert loader.persistent_workers
    first, second = ([batch["frozen"][0] for batch in loader] for _ in range(2))
    assert first[0] > 1000 and second == [0]
