"""Assets: raw table → validated table (+ quarantine) → shard set version → published version."""
