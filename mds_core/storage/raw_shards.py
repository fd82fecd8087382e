"""Raw shard files for readers: decompress a shard once, through a temporary file and a rename.

Readers see either no raw file or a complete one: a crash mid-decompression leaves only a
temporary file with a unique name, never a truncated shard under the real name. Shards of a
remote stream come through ``ShardCache`` (``storage/shard_cache.py``), which downloads first.
"""

from __future__ import annotations

import os
import tempfile

from mds_core.errors import CompressionError, CorruptShardError, MDSError
from mds_core.format.compression import get_codec
from mds_core.format.index import ShardInfo


def raw_shard_path(root: str, shard: ShardInfo, cache_root: str | None = None) -> str:
    """The local path of ``shard``'s raw file, decompressing its zip first if needed.

    ``cache_root`` is where decompressed files go; by default next to the zip, as the reference does.
    """
    in_place = os.path.join(root, shard.raw_data.basename)
    if shard.zip_data is None or has_size(in_place, shard.raw_data.bytes):
        if not os.path.exists(in_place):
            raise CorruptShardError(f"{in_place}: shard file is missing")
        return in_place  # a size mismatch is reported by the reader, with context
    raw_path = os.path.join(cache_root or root, shard.raw_data.basename)
    if has_size(raw_path, shard.raw_data.bytes):
        return raw_path
    zip_path = os.path.join(root, shard.zip_data.basename)
    if not os.path.exists(zip_path):
        raise CorruptShardError(f"{zip_path}: compressed shard file is missing (and no decompressed copy exists)")
    decompress_shard(zip_path, raw_path, shard)
    return raw_path


def decompress_shard(zip_path: str, raw_path: str, shard: ShardInfo) -> None:
    """Decompress ``zip_path`` to ``raw_path`` atomically, checking the size the index records."""
    codec = get_codec(shard.compression)
    directory = os.path.dirname(raw_path) or "."
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(prefix=os.path.basename(raw_path) + ".", suffix=".tmp", dir=directory)
    except OSError as err:
        raise MDSError(f"{raw_path}: cannot write the decompressed shard ({err}); pass a writable cache_dir") from err
    try:
        with open(zip_path, "rb") as src, os.fdopen(fd, "wb") as dst:
            codec.decompress_file(src, dst)
            written = dst.tell()
        if written != shard.raw_data.bytes:
            raise CorruptShardError(
                f"{zip_path}: decompresses to {written} bytes but the index says {shard.raw_data.bytes}"
            )
        os.replace(tmp_path, raw_path)
    except CompressionError as err:
        raise CorruptShardError(f"{zip_path}: {err}") from err
    finally:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)


def has_size(path: str, size: int) -> bool:
    try:
        return os.stat(path).st_size == size
    except FileNotFoundError:
        return False
