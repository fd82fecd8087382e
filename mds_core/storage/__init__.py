"""Where bytes live: local files written safely (``files``), the one URL rule (``urls``), every remote
store through fsspec (``remote``), the writers' destinations (``output``), decompressed shards for
readers (``raw_shards``) and the node's shard cache with its eviction (``shard_cache``)."""
