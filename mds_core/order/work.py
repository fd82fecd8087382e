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
    spec = _order_spec_of(source)
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
    sample_in_epoch = as_int("sample_in_epoch", sample_in_epoch, 0)
    if spec.batching_method == "device_per_stream" and settings.canonical_nodes % nodes:
        raise ConfigurationError(
            f"device_per_stream batching needs num_canonical_nodes divisible by the number of physical "
            f"nodes; got {settings.canonical_nodes} canonical and {nodes} physical nodes: set "
            f"num_canonical_nodes to a multiple of {nodes}"
        )
    return BATCHING[spec.batching_method](settings, sample_in_epoch)


def _order_spec_of(source: Any) -> OrderSpec:
    spec = source if isinstance(source, OrderSpec) else getattr(source, "order_spec", None)
    if not isinstance(spec, OrderSpec):
        raise TypeError(
            f"generate_work needs an OrderSpec or an object with an order_spec, got {type(source).__name__}"
        )
    return spec
