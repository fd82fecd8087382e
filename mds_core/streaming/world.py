"""This process's place in the training world, read from torchrun's environment and, inside a
DataLoader worker, from ``torch.utils.data.get_worker_info()``, as the reference does."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Mapping

from mds_core.errors import ConfigurationError
from mds_core.order.world import World


def detect_world(environ: Mapping[str, str] | None = None) -> World:
    """This process's world: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and its worker."""
    env = os.environ if environ is None else environ
    rank = _env_int(env, "RANK", 0)
    world_size = _env_int(env, "WORLD_SIZE", 1)
    local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", 1)
    local_rank = _env_int(env, "LOCAL_RANK", rank % local_world_size)
    if world_size < 1 or local_world_size < 1 or world_size % local_world_size:
        raise ConfigurationError(
            f"WORLD_SIZE={world_size} must be a positive multiple of LOCAL_WORLD_SIZE={local_world_size}"
        )
    if not 0 <= rank < world_size or local_rank != rank % local_world_size:
        raise ConfigurationError(
            f"RANK={rank}, LOCAL_RANK={local_rank} do not fit WORLD_SIZE={world_size} with "
            f"LOCAL_WORLD_SIZE={local_world_size} (ranks must be node-contiguous)"
        )
    workers, worker = _worker_info()
    return World(
        num_nodes=world_size // local_world_size,
        ranks_per_node=local_world_size,
        rank=rank,
        workers_per_rank=workers,
        worker_of_rank=worker,
    )


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"environment variable {name}={value!r} must be an integer") from None


def _worker_info() -> tuple[int, int]:
    """(workers per rank, this worker) inside a DataLoader worker, else (1, 0)."""
    # A DataLoader worker has torch loaded already; importing it otherwise would cost seconds.
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 1, 0
    info = torch_data.get_worker_info()
    return (info.num_workers, info.id) if info is not None else (1, 0)


def freeze_inherited_heap(checked_in_pid: int | None = None) -> int:
    """In a DataLoader worker, once: take the objects it inherited out of the garbage collector's walks.

    A forked worker shares its parent's heap copy-on-write. Its first full collection walked every
    inherited object (torch's included), copying their pages and holding the GIL for ~100 ms; the
    queue thread that sends the first batch waited for it (a resumed loader's first batch: 0.05 →
    0.18 s). ``gc.freeze`` is what Python's documentation advises for forked children; objects made
    afterwards are collected as usual. Skipped where the process froze objects already.

    Returns this process's id; pass it back as ``checked_in_pid`` to skip the check next time:
    ``gc.get_freeze_count`` walks every frozen object (24 ms after torch's heap is frozen), which a
    persistent worker would pay at every epoch.
    """
    pid = os.getpid()
    torch_data = sys.modules.get("torch.utils.data")
    if checked_in_pid != pid and torch_data is not None and torch_data.get_worker_info() is not None:
        if gc.get_freeze_count() == 0:
            gc.freeze()
    return pid
