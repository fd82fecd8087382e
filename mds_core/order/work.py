"""``generate_work``: which global sample each (node, rank, worker, batch, slot) reads in an epoch.

It reproduces Mosaic Streaming 0.13's ``generate_work`` (``docs/ordering.md``, "Batching"): resample
the streams, partition the epoch's positions over the world, shuffle them, and map them to global
("small") sample ids. The result has the shape ``(P, R, W, batches, B)`` with ``-1`` as padding,
and the DataLoader traverses it as ``mds_core.order.traversal`` says.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.arguments import as_int
from mds_core.order.batching import BATCHING
from mds_core.order.epoch import EpochSettings
from mds_core.order.partition import leading_rounds, nodes_compatible
from mds_core.order.remap import read_span_per_node
from mds_core.order.shuffle import get_shuffle
from mds_core.order.spec import OrderSpec, check_batch_size
from mds_core.order.world import World, replicate_world


def generate_work(
    source: OrderSpec | Any,
    num_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    epoch: int,
    sample_in_epoch: int = 0,
) -> NDArray[np.int64]:
    """The whole epoch's global sample ids, shape ``(P, R, W, batches, B)``, ``-1`` for padding.

    ``source`` is an :class:`OrderSpec` or an object with an ``order_spec`` attribute (the
    dataset). The world is the physical one (``workers_per_rank`` is 1 without DataLoader workers);
    under ``replication`` the result has the replication-adjusted shape (:func:`replicate_world`).
    ``sample_in_epoch`` is how many of the epoch's samples were already consumed (resumption).
    """
    settings = _epoch_settings(_order_spec_of(source), num_nodes, ranks_per_node, workers_per_rank, epoch)
    return BATCHING[settings.spec.batching_method](settings, as_int("sample_in_epoch", sample_in_epoch, 0))


def generate_head(
    spec: OrderSpec,
    num_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    epoch: int,
    sample_in_epoch: int,
    rounds: int,
) -> NDArray[np.int64] | None:
    """``generate_work(...)[:, :, :, :rounds]``, at a cost that does not grow with the rest of the epoch.

    ``None`` where no shortcut applies (another batching method, partition or shuffle, or the rounds
    reach the epoch's end): the caller computes the whole epoch instead. Otherwise it orders only
    the window of positions the rounds read (``shuffle_py1e``'s ``starts`` and ``stops``).
    """
    settings = _epoch_settings(spec, num_nodes, ranks_per_node, workers_per_rank, epoch)
    world, initial = settings.world, spec.initial_physical_nodes
    orig = (
        spec.partition_algo == "orig" or initial is None or nodes_compatible(settings.canonical_nodes, world.num_nodes)
    )
    windowed = not spec.shuffle or spec.shuffle_algo == "py1e"  # the one shuffle that orders a window alone
    if spec.batching_method != "random" or not windowed or not orig:
        return None
    units, small_per_big, num_samples = settings.units_and_table()
    head = leading_rounds(
        num_samples,
        settings.canonical_nodes,
        world.num_nodes,
        world.ranks_per_node,
        world.workers_per_rank,
        settings.batch_size,
        as_int("sample_in_epoch", sample_in_epoch, 0),
        rounds,
    )
    if head is None:
        return None
    if spec.shuffle:
        starts, stops = read_span_per_node(head, num_samples, settings.canonical_nodes)
        permutation = get_shuffle(
            "py1e",
            units,
            settings.canonical_nodes,
            spec.shuffle_seed,
            epoch,
            settings.block_size,
            starts=starts,
            stops=stops,
        )
        head = permutation[head]
    return head if small_per_big is None else small_per_big[head]


def _epoch_settings(
    spec: OrderSpec, num_nodes: int, ranks_per_node: int, workers_per_rank: int, epoch: int
) -> EpochSettings:
    """The epoch's settings for the world, checked as the reference checks them."""
    nodes, ranks = replicate_world(num_nodes, ranks_per_node, spec.replication)
    world = World(num_nodes=nodes, ranks_per_node=ranks, workers_per_rank=as_int("workers_per_rank", workers_per_rank))
    if spec.batch_size is None:
        raise ConfigurationError(
            "Please pass `batch_size` to StreamingDataset: it is needed to order samples (the per-device "
            "batch size, the same as the DataLoader's)"
        )
    settings = EpochSettings(
        spec=spec,
        world=world,
        epoch=as_int("epoch", epoch, 0),
        batch_size=check_batch_size(spec.batch_size),
        canonical_nodes=spec.canonical_nodes(nodes),
        block_size=spec.block_size(nodes),
    )
    if spec.batching_method == "device_per_stream" and settings.canonical_nodes % nodes:
        raise ConfigurationError(
            f"device_per_stream batching needs num_canonical_nodes divisible by the number of physical "
            f"nodes; got {settings.canonical_nodes} canonical and {nodes} physical nodes: set "
            f"num_canonical_nodes to a multiple of {nodes}"
        )
    return settings


def _order_spec_of(source: Any) -> OrderSpec:
    spec = source if isinstance(source, OrderSpec) else getattr(source, "order_spec", None)
    if not isinstance(spec, OrderSpec):
        raise TypeError(
            f"generate_work needs an OrderSpec or an object with an order_spec, got {type(source).__name__}"
        )
    return spec
