"""Which sample when: shuffles, partitions and stream mixing (the streaming issue fills this in)."""

from mds_core.order.partition import PARTITION_ALGOS, get_partitions, traversal_order
from mds_core.order.shuffle import SHUFFLE_ALGOS, get_shuffle
from mds_core.order.mixing import SAMPLING_METHODS, StreamMix, StreamWeights, apply_weights, get_sampling, parse_epoch_size, resample_streams
from mds_core.order.spec import BATCHING_METHODS, OrderSpec
from mds_core.order.batching import generate_work, replicate_world
