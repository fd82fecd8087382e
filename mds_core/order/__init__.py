"""Which sample when, as pure functions of the data's shard sizes, the settings, the world and the epoch.

``spec`` (the settings), ``mixing`` (stream weights and resampling), ``partition`` (positions over
nodes, ranks, workers and batches), ``shuffle/`` (the permutations), ``batching`` (the four
batching methods), ``work`` (``generate_work``, which ties them together), ``traversal`` (the
DataLoader's reading order), ``world`` and ``simulate`` (``mds check-order``). Bit-exact with
Mosaic Streaming 0.13; see ``docs/ordering.md``.
"""

from mds_core.order.mixing import (
    SAMPLING_METHODS,
    StreamMix,
    StreamWeights,
    apply_weights,
    get_sampling,
    parse_epoch_size,
    resample_streams,
)
from mds_core.order.partition import PARTITION_ALGOS, get_partitions
from mds_core.order.shuffle import SHUFFLE_ALGOS, get_shuffle
from mds_core.order.spec import BATCHING_METHODS, OrderSpec
from mds_core.order.traversal import traversal_order
from mds_core.order.work import generate_work
from mds_core.order.world import World, replicate_world

__all__ = [
    "BATCHING_METHODS",
    "PARTITION_ALGOS",
    "SAMPLING_METHODS",
    "SHUFFLE_ALGOS",
    "OrderSpec",
    "StreamMix",
    "StreamWeights",
    "World",
    "apply_weights",
    "generate_work",
    "get_partitions",
    "get_sampling",
    "get_shuffle",
    "parse_epoch_size",
    "replicate_world",
    "resample_streams",
    "traversal_order",
]
