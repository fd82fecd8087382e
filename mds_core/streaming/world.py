"""This process's place in the training world.

From ``torch.distributed``'s process group when one is initialised, else from torchrun's environment, and inside a
DataLoader worker from ``torch.utils.data.get_worker_info()``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

# Imported in the training process, before any DataLoader worker forks: torch's worker set-up seeds numpy's global
# generator, and where the parent had not imported numpy.random each worker imported it for itself, into 3.8 MiB of
# its own pages (0.06 GiB over a node of 8 ranks x 2 workers). The order's shuffles need it in any case.
import numpy.random  # noqa: F401

from mds_core.errors import ConfigurationError
from mds_core.order.world import World


def detect_world(environ: Mapping[str, str] | None = None) -> World:
    """This process's world: its rank's place (``rank_world``) and, in a DataLoader worker, its worker.

    Call it once per dataset, in the rank's process (``rank_world`` may ask every rank for its host),
    and keep the result: a DataLoader worker adds its own place with ``in_worker``.
    """
    return in_worker(rank_world(environ))


def rank_world(environ: Mapping[str, str] | None = None) -> World:
    """Nodes, ranks per node and this rank.

    From the process group when ``torch.distributed`` is initialised, else from torchrun's ``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``.

    Launchers differ in what they state: Lightning's sets ``LOCAL_RANK`` and ``WORLD_SIZE`` but not
    ``RANK``, and ``torch.multiprocessing.spawn`` with ``init_process_group`` sets none of them, so
    every rank would read the whole epoch. The process group knows the truth. Its local world is
    ``LOCAL_WORLD_SIZE`` where set, else the number of ranks on this host (a collective: every rank
    must construct its dataset, as DDP training scripts do).
    """
    env = os.environ if environ is None else environ
    group = _initialised_group()
    if group is None:
        return _env_world(env)
    rank, world_size = group.get_rank(), group.get_world_size()
    for name, value in (("RANK", rank), ("WORLD_SIZE", world_size)):
        stated = _env_int(env, name, value)
        if stated != value:
            raise ConfigurationError(
                f"{name}={stated} in the environment, but torch.distributed's process group says {value}: "
                f"start every rank with the same launcher settings"
            )
    if env.get("LOCAL_WORLD_SIZE"):
        local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", 1)
    else:
        hosts: list[str] = [""] * world_size
        group.all_gather_object(hosts, socket.gethostname())
        local_world_size = ranks_per_host(hosts)
    return _checked(rank, world_size, rank % local_world_size, local_world_size)


def current_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank, without asking other ranks anything."""
    group = _initialised_group()
    env = os.environ if environ is None else environ
    return int(group.get_rank()) if group is not None else _env_int(env, "RANK", 0)


def ranks_per_host(hosts: list[str]) -> int:
    """Ranks per node when rank ``r`` runs on ``hosts[r]``: node-contiguous, the same number on every node."""
    per_node = hosts.count(hosts[0])
    expected = [hosts[(r // per_node) * per_node] for r in range(len(hosts))]
    if len(hosts) % per_node or hosts != expected or len(set(hosts)) != len(hosts) // per_node:
        raise ConfigurationError(
            f"the ranks' hosts {hosts} are not node-contiguous with the same number of ranks on every host; "
            "set LOCAL_WORLD_SIZE, or start ranks 0..k-1 on the first host, k..2k-1 on the next, and so on"
        )
    return per_node


def in_worker(world: World) -> World:
    """``world`` as seen from this process: inside a DataLoader worker, that worker's place."""
    workers, worker = _worker_info()
    return replace(world, workers_per_rank=workers, worker_of_rank=worker)


def _initialised_group() -> Any:
    """``torch.distributed`` if this process has joined a process group (torch is not imported here)."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return None
    return distributed


def _env_world(env: Mapping[str, str]) -> World:
    rank = _env_int(env, "RANK", 0)
    world_size = _env_int(env, "WORLD_SIZE", 1)
    local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", 1)
    local_rank = _env_int(env, "LOCAL_RANK", rank % local_world_size)
    return _checked(rank, world_size, local_rank, local_world_size)


def _checked(rank: int, world_size: int, local_rank: int, local_world_size: int) -> World:
    if world_size < 1 or local_world_size < 1 or world_size % local_world_size:
        raise ConfigurationError(
            f"WORLD_SIZE={world_size} must be a positive multiple of LOCAL_WORLD_SIZE={local_world_size}"
        )
    if not 0 <= rank < world_size or local_rank != rank % local_world_size:
        raise ConfigurationError(
            f"RANK={rank}, LOCAL_RANK={local_rank} do not fit WORLD_SIZE={world_size} with "
            f"LOCAL_WORLD_SIZE={local_world_size} (ranks must be node-contiguous)"
        )
    return World(num_nodes=world_size // local_world_size, ranks_per_node=local_world_size, rank=rank)


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
    info = _loader_worker()
    return (info.num_workers, info.id) if info is not None else (1, 0)


def first_step_samples(batch_size: int | None) -> int:
    """How many samples this process's consumer takes at once at first: a DataLoader worker's batch, else one."""
    return (batch_size or 1) if _loader_worker() is not None else 1


def _loader_worker() -> Any:
    """The ``WorkerInfo`` of torch inside a DataLoader worker, else None."""
    # A DataLoader worker has torch loaded already; importing it otherwise would cost seconds.
    torch_data = sys.modules.get("torch.utils.data")
    return None if torch_data is None else torch_data.get_worker_info()


def freeze_inherited_heap(checked_in_pid: int | None = None) -> int:
    """In a DataLoader worker, once: take the objects it inherited out of the garbage collector's walks.

    A forked worker shares its parent's heap copy-on-write. Its first full collection walked every
    inherited object (torch's included), copying their pages and holding the GIL for ~100 ms; the
    queue thread that sends the first batch waited for it (a resumed loader's first batch: 0.05 →
    0.18 s). ``gc.freeze`` is what Python's documentation advises for forked children; objects made
    afterwards are collected as usual. ``StreamingDataLoader`` freezes the heap before its workers fork
    (``heap_frozen_for_fork``); this covers workers that other loaders fork.

    Returns this process's id; pass it back as ``checked_in_pid`` to skip the freeze next time (a persistent
    worker's later epochs).
    """
    pid = os.getpid()
    torch_data = sys.modules.get("torch.utils.data")
    if checked_in_pid != pid and torch_data is not None and torch_data.get_worker_info() is not None:
        gc.freeze()  # constant time: it moves the generations' lists, where ``gc.get_freeze_count`` walks them
    return pid


@contextlib.contextmanager
def heap_frozen_for_fork() -> Iterator[None]:
    """While DataLoader workers fork: the parent's objects frozen, so that no worker's collection walks them.

    Python's documentation advises ``gc.freeze`` right before ``fork``. A worker's dataset freezes what it
    inherited (``freeze_inherited_heap``), but torch's worker set-up runs first, and where the counters it
    inherited stood near a full collection, that collection walked (and copied) the whole inherited heap: one
    more import in the library (``ctypes.util``) cost a node of 8 ranks x 2 workers 0.55 GiB and 0.7 s before
    its first batch. Unfrozen once the workers have forked, so the parent collects as before; left alone where
    the process froze objects itself.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
