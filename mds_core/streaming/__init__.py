"""Reading for training.

``LocalDataset`` (one local MDS directory), ``Stream`` and ``StreamingDataset`` (the reference's exact sample order over
local or remote streams), ``StreamingDataLoader`` (resumable mid-epoch), and what they stand on: the world, the per-job
directory, resumption, prefetching.

Import the public classes from ``mds_core``; ``StreamingDataLoader`` imports torch.
"""
