"""Where bytes live.

Local files written safely (``files``), the one URL rule (``urls``), the registry of stores (``stores``, with each
store's set-up in ``s3``, ``gcs``, ``azure`` and ``volumes``), Unity Catalog table names for delta-rs
(``unity_catalog``), every store through one client (``remote``), the writers' destinations (``output``), decompressed
shards for readers (``raw_shards``) and the node's shard cache with its eviction (``shard_cache``).
"""
