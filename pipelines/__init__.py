"""The Dagster code location: raw Spark tables -> validated DataFrames -> versioned MDS shard sets."""
