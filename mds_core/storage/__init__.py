"""Where shard bytes live: output directories for writers, and raw shard files for readers."""
