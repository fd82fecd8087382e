"""Bytes on disk: encodings, the shard layout, index.json, compression, hashing and verification. No network I/O."""

from mds_core.format.compression import get_codec, get_compressions
from mds_core.format.encodings import (
    get_coder,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
)
from mds_core.format.hashing import get_hash, get_hashes
from mds_core.format.index import FileInfo, ShardInfo, get_index_basename, load_index, parse_index
from mds_core.format.shard import Schema, ShardReader, build_shard

__all__ = [
    "FileInfo",
    "Schema",
    "ShardInfo",
    "ShardReader",
    "build_shard",
    "get_codec",
    "get_coder",
    "get_compressions",
    "get_hash",
    "get_hashes",
    "get_index_basename",
    "get_mds_encoded_size",
    "get_mds_encodings",
    "is_mds_encoding",
    "is_mds_encoding_safe",
    "load_index",
    "mds_decode",
    "mds_encode",
    "parse_index",
]
