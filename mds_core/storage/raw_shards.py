"""Raw shard files for readers: decompress a shard once, through a temporary file and a rename.

Readers see either no raw file or a complete one: a crash mid-decompression leaves only a
temporary file with a unique name, never a truncated shard under the real name. Shards of a
remote stream come through ``ShardCache`` (``storage/shard_cache.py``), which downloads first.
"""

from __future__ import annotations

import os

from mds_core.errors import CompressionError, CorruptShardError, StorageError
from mds_core.format.compression import get_codec
from mds_core.format.index import ShardInfo
from mds_core.storage.files import atomic_file, has_size
from mds_core.storage.folders import inside


def raw_shard_path(root: str, shard: ShardInfo, cache_root: str | None = None) -> str:
    """The local path of ``shard``'s raw file, decompressing its zip first if needed.

    ``cache_root`` is where decompressed files go; by default next to the zip, as the reference does.
    """
    in_place = os.path.join(root, shard.raw_data.basename)
    if shard.zip_data is None or has_size(in_place, shard.raw_data.bytes):
        if not os.path.exists(in_place):
            raise CorruptShardError(f"{in_place}: shard file is missing")
        return in_place  # a size mismatch is reported by the reader, with context
    raw_path = inside(cache_root or root, shard.raw_data.basename)  # a link must not lead the output elsewhere
    if has_size(raw_path, shard.raw_data.bytes):
        return raw_path
    zip_path = os.path.join(root, shard.zip_data.basename)
    if not os.path.exists(zip_path):
        raise CorruptShardError(f"{zip_path}: compressed shard file is missing (and no decompressed copy exists)")
    decompress_shard(zip_path, raw_path, shard)
    return raw_path


def decompress_shard(zip_path: str, raw_path: str, shard: ShardInfo) -> None:
    """Decompress ``zip_path`` to ``raw_path`` atomically, checking the size the index records.

    The output stops at that size: a zip that inflates past it (a damaged file or a decompression
    bomb) fails after a chunk of work, and its temporary file is removed.
    """
    codec = get_codec(shard.compression)
    if codec is None:  # load_index refuses this; a ShardInfo made by hand may not
        raise CorruptShardError(f"{zip_path}: the index gives the shard a compressed file but no compression")
    try:
        # A cache of the zip, checked by size before use: not synced (see RemoteStore.download).
        with open(zip_path, "rb") as src, atomic_file(raw_path, durable=False) as dst:
            codec.decompress_file(src, dst, shard.raw_data.bytes)
            written = dst.tell()
            if written != shard.raw_data.bytes:
                raise CorruptShardError(
                    f"{zip_path}: decompresses to {written} bytes but the index says {shard.raw_data.bytes}"
                )
    except CompressionError as err:
        raise CorruptShardError(f"{zip_path}: {err}") from err
    except OSError as err:
        raise StorageError(
            f"{raw_path}: cannot decompress {zip_path} into it ({err}); if the dataset's directory "
            "is read-only, pass a writable cache_dir"
        ) from err
