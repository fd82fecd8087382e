"""``merge_index``: one ``index.json`` over several datasets stored in sub-directories of a root.

Basenames gain the partition's path relative to the root (``part0/shard.00000.mds``), every level of
it, so merging already-merged datasets nests correctly (the reference keeps only the last level).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from mds_core.errors import MergeError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, dumps_merged_index, load_index
from mds_core.storage.output import atomic_write, is_url

PathOrPair = str | os.PathLike[str] | tuple[str, str]


def merge_index(*args: Any, **kwargs: Any) -> None:
    """Merge partition indexes; both of the reference's call forms.

    ``merge_index(index_file_urls, out, keep_local=True, download_timeout=60)`` merges the given
    ``index.json`` files (paths or ``(local, remote)`` pairs) in the given order.
    ``merge_index(out, keep_local=True, download_timeout=60)`` finds every top-level partition
    ``index.json`` under ``out`` (sorted by path) and merges those.
    """
    first = args[0] if args else kwargs.get("index_file_urls", kwargs.get("out"))
    if isinstance(first, list):
        _merge_listed(*args, **kwargs)
    else:
        _merge_root(*args, **kwargs)


def _merge_listed(
    index_file_urls: list[PathOrPair], out: PathOrPair, keep_local: bool = True, download_timeout: int = 60
) -> None:
    root = _local_part(out)
    shards: list[ShardInfo] = []
    for entry in dict.fromkeys(index_file_urls):  # de-duplicate, keep order
        path = _local_part(entry)
        prefix = _partition_prefix(path, root)
        shards.extend(shard.with_prefix(prefix) for shard in load_index(path))
    _check_same_columns(shards)
    atomic_write(os.path.join(root, INDEX_BASENAME), [dumps_merged_index(shards).encode("utf-8")])
    if not keep_local and isinstance(out, tuple) and out[1]:
        shutil.rmtree(root)


def _merge_root(out: PathOrPair, keep_local: bool = True, download_timeout: int = 60) -> None:
    root = _local_part(out)
    partitions = find_partition_indexes(root)
    if not partitions:
        raise MergeError(f"{root}: no partition index.json files found in its sub-directories")
    _merge_listed(partitions, out, keep_local, download_timeout)


def find_partition_indexes(root: str) -> list[str]:
    """Every ``index.json`` below ``root`` that no higher ``index.json`` (other than root's) covers."""
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        if directory != root and INDEX_BASENAME in files:
            found.append(os.path.join(directory, INDEX_BASENAME))
            subdirs.clear()  # a merged index here already covers everything below it
    return sorted(found)


def _partition_prefix(index_path: str, root: str) -> str:
    partition = os.path.dirname(os.path.abspath(index_path))
    relative = os.path.relpath(partition, os.path.abspath(root))
    if relative == "." or relative.startswith(".."):
        raise MergeError(f"{index_path}: a partition must be in a sub-directory of the merged root {root}")
    return relative.replace(os.sep, "/")


def _check_same_columns(shards: list[ShardInfo]) -> None:
    columns = {(tuple(s.column_names), tuple(s.column_encodings)) for s in shards}
    if len(columns) > 1:
        raise MergeError(f"partitions have different columns and cannot be merged: {sorted(columns)}")


def _local_part(path: PathOrPair) -> str:
    if isinstance(path, tuple):
        local, remote = path
        if not local and remote:
            raise MergeError(f"merging remote indexes ({remote}) is not supported yet; pass local paths")
        return os.fspath(local)
    path = os.fspath(path)
    if is_url(path):
        raise MergeError(f"merging remote indexes ({path}) is not supported yet; pass local paths")
    return path
