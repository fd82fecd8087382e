"""``merge_index``: one ``index.json`` over several datasets stored in sub-directories of a root.

Basenames gain the partition's path relative to the root (``part0/shard.00000.mds``), every level of
it, so merging already-merged datasets nests correctly (the reference keeps only the last level).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Sequence
from typing import Any

from mds_core.errors import MergeError, StorageError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, check_same_columns, dumps_merged_index, parse_index
from mds_core.storage.files import atomic_write
from mds_core.storage.output import Out, parse_out
from mds_core.storage.remote import open_store
from mds_core.storage.urls import is_remote


def merge_index(*args: Any, **kwargs: Any) -> None:
    """Merge partition indexes; both of the reference's call forms.

    ``merge_index(index_file_urls, out, keep_local=True, download_timeout=60)`` merges the given
    ``index.json`` files (paths or ``(local, remote)`` pairs) in the given order.
    ``merge_index(out, keep_local=True, download_timeout=60)`` finds every top-level partition
    ``index.json`` under ``out`` (sorted by path) and merges those.

    Args:
        *args: ``index_file_urls`` then ``out``, or ``out`` alone, as above.
        **kwargs: ``index_file_urls`` and ``out`` by name, and ``keep_local`` (keep the downloaded
            partition indexes, True) and ``download_timeout`` (seconds per download, 60).
    """
    first = args[0] if args else kwargs.get("index_file_urls", kwargs.get("out"))
    if not first:
        raise MergeError(
            f"nothing to merge: the first argument is {first!r}; pass the partition index.json "
            "files and out, or the root directory that holds the partitions"
        )
    if isinstance(first, list):
        _merge_listed(*args, **kwargs)
    else:
        _merge_root(*args, **kwargs)


def _merge_listed(
    index_file_urls: Sequence[Out], out: Out, keep_local: bool = True, download_timeout: int = 60
) -> None:
    if not out:
        raise MergeError(
            f"merge_index: out is {out!r}; give the merged dataset's root (a path, URL or (local, remote))"
        )
    location = parse_out(out)
    local_out, remote_out, root = location.local, location.remote, location.home
    shards: list[ShardInfo] = []
    for entry in dict.fromkeys(index_file_urls):  # de-duplicate, keep order
        partition, text = _read_index(entry, download_timeout)
        prefix = _partition_prefix(partition, root)
        shards.extend(shard.with_prefix(prefix) for shard in parse_index(text, partition))
    check_same_columns(shards, "partitions")
    data = dumps_merged_index(shards).encode("utf-8")
    if remote_out:
        open_store(remote_out, timeout=download_timeout).write_bytes(INDEX_BASENAME, data)
    if local_out and (keep_local or not remote_out):
        os.makedirs(local_out, exist_ok=True)
        atomic_write(os.path.join(local_out, INDEX_BASENAME), [data])
    elif local_out and os.path.isdir(local_out):
        shutil.rmtree(local_out)


def _merge_root(out: Out, keep_local: bool = True, download_timeout: int = 60) -> None:
    root = parse_out(out).home
    partitions = find_partition_indexes(root, download_timeout)
    if not partitions:
        raise MergeError(f"{root}: no partition index.json files found in its sub-directories")
    _merge_listed(partitions, out, keep_local, download_timeout)


def find_partition_indexes(root: str, download_timeout: float = 60) -> list[str]:
    """Every ``index.json`` below ``root`` (a path or URL) that no higher ``index.json`` (other than root's) covers."""
    store = open_store(root, timeout=download_timeout)
    indexes = [name for name in store.list() if posixpath.basename(name) == INDEX_BASENAME and "/" in name]
    found: list[str] = []
    for name in sorted(indexes, key=lambda n: (n.count("/"), n)):
        directory = posixpath.dirname(name) + "/"
        if not any(directory.startswith(posixpath.dirname(f) + "/") for f in found):
            found.append(name)  # a merged index here already covers everything below it
    return sorted(store.address_of(name) if is_remote(root) else os.path.join(root, name) for name in found)


def _read_index(entry: Out, timeout: float) -> tuple[str, bytes]:
    """(where the partition lives, the text of its index.json) for a path, URL or (local, remote)."""
    location = parse_out(entry)
    local, remote = location.local, location.remote
    if local and os.path.exists(local):
        with open(local, "rb") as file:
            return (remote or local), file.read()
    if not remote:
        raise MergeError(f"{local}: no such index.json")
    directory, basename = remote.rsplit("/", 1)
    try:
        return remote, open_store(directory, timeout=timeout).read_bytes(basename)
    except StorageError as err:
        raise MergeError(f"cannot read partition index {remote}: {err}") from err


def _partition_prefix(index_path: str, root: str) -> str:
    if is_remote(root) != is_remote(index_path):
        raise MergeError(f"{index_path}: a partition must be in a sub-directory of the merged root {root}")
    if is_remote(root):
        partition, base = posixpath.dirname(index_path), root.rstrip("/")
        relative = partition[len(base) + 1 :] if partition.startswith(base + "/") else ".."
    else:
        partition = os.path.dirname(os.path.abspath(index_path))
        relative = os.path.relpath(partition, os.path.abspath(root)).replace(os.sep, "/")
    if relative in (".", "") or relative.startswith(".."):
        raise MergeError(f"{index_path}: a partition must be in a sub-directory of the merged root {root}")
    return relative
