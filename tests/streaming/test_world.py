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
