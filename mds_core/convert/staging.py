"""Where ``dataframe_to_mds`` writes: staging per task attempt, commit of the winners, index last.

Every attempt writes below ``<out>/_staging/<run>/<partition>.<attempt>``; ``Target.commit`` moves
each partition's winning attempt to ``<out>/<partition:05>``, removes the rest of the run's staging
tree and then publishes the merged ``index.json``, so a reader never sees a half-written dataset
and retried or speculative attempts leave no orphans. Works for local paths and remote URLs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from mds_core.convert.table import ConversionStats
from mds_core.errors import OutputExistsError
from mds_core.format.index import INDEX_BASENAME, dumps_merged_index, parse_index

STAGING_DIR = "_staging"


class Target:
    """The converter's output location: where staging lives, how attempts are committed."""

    def __init__(self, url: str, local: str | None, remote: str | None) -> None:
        self.url, self.local, self.remote = url, local, remote
        self._remote_store: Any = None

    def staging_location(self, run: str) -> str:
        return f"{self.url}/{STAGING_DIR}/{run}" if self.remote else os.path.join(self.url, STAGING_DIR, run)

    def commit(self, manifests: list[dict[str, Any]], staging: str, merge: bool) -> ConversionStats:
        """Move each partition's winning attempt into place, drop the rest, publish index.json last."""
        stats = ConversionStats()
        shards = []
        for manifest in sorted(manifests, key=lambda m: m["partition"]):
            stats.rows_per_partition.append(manifest["rows"])
            stats.rows += manifest["rows"]
            stats.skipped_rows += manifest["skipped"]
            partition_shards = parse_index(manifest["index"], f"partition {manifest['partition']}")
            stats.add_shards(partition_shards)
            if not partition_shards:
                continue  # an empty partition gets no directory
            name = f"{manifest['partition']:05}"
            # Only the stored file of each shard exists: the compressed one, or the raw one when uncompressed.
            stored = [(shard.zip_data or shard.raw_data).basename for shard in partition_shards]
            self._move_attempt(f"{staging}/{manifest['staging']}", name, stored)
            shards += [s.with_prefix(name) for s in partition_shards]
        self.discard(staging)
        if merge:
            self._publish(INDEX_BASENAME, dumps_merged_index(shards).encode("utf-8"))
        return stats

    def _move_attempt(self, attempt: str, name: str, files: list[str]) -> None:
        if not self.remote:
            os.replace(attempt, os.path.join(self.url, name))
            return
        store = self._store()
        rel = attempt[len(self.url) + 1:]
        for basename in [*files, INDEX_BASENAME]:  # the partition's index last
            store.move(f"{rel}/{basename}", f"{name}/{basename}")

    def _publish(self, rel: str, data: bytes) -> None:
        if self.remote:
            self._store().write_bytes(rel, data)
            if self.local:
                from mds_core.storage.output import atomic_write

                atomic_write(os.path.join(self.local, rel), [data])
        else:
            from mds_core.storage.output import atomic_write

            atomic_write(os.path.join(self.url, rel), [data])

    def discard(self, staging: str) -> None:
        """Remove a run's staging tree (losing attempts included), and ``_staging`` once empty."""
        if self.remote:
            self._store().delete_tree(staging[len(self.url) + 1:])
            return
        shutil.rmtree(staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(staging))
        except OSError:
            pass  # another run's staging is still there

    def local_result(self, keep_local: bool) -> str:
        if self.remote:
            if self.local and not keep_local:
                shutil.rmtree(self.local, ignore_errors=True)
            return self.local or ""
        return self.url

    def _store(self) -> Any:
        if self._remote_store is None:
            from mds_core.storage.remote import open_store

            self._remote_store = open_store(self.url)
        return self._remote_store


def open_target(out: Any, exist_ok: bool) -> Target:
    """Resolve ``out`` and refuse (or, with ``exist_ok``, clear) a location that already holds data."""
    local, remote = (out if isinstance(out, tuple) else (None, out))
    remote = os.fspath(remote) if remote is not None else None
    if remote is not None and not _is_remote(remote):
        local, remote = remote, None
    if remote is None:
        path = os.fspath(local)
        target = Target(os.path.abspath(path[len("file://"):] if path.startswith("file://") else path), None, None)
        _prepare_local(target.url, exist_ok)
        return target
    local = os.fspath(local) if local is not None else tempfile.mkdtemp(prefix="mds-driver-")
    os.makedirs(local, exist_ok=True)
    target = Target(remote.rstrip("/"), local, remote.rstrip("/"))
    _prepare_remote(target, exist_ok)
    return target


def _is_remote(path: str) -> bool:
    from urllib.parse import urlparse

    scheme = urlparse(path).scheme
    return len(scheme) > 1 and scheme != "file"


def _prepare_local(path: str, exist_ok: bool) -> None:
    existing = [name for name in os.listdir(path) if name != STAGING_DIR] if os.path.isdir(path) else []
    if existing and not exist_ok:
        raise OutputExistsError(f"{path} already holds {sorted(existing)[:5]}; write elsewhere or pass "
                                "exist_ok=True in mds_kwargs to replace it")
    for name in existing:
        full = os.path.join(path, name)
        shutil.rmtree(full) if os.path.isdir(full) and not os.path.islink(full) else os.unlink(full)
    os.makedirs(path, exist_ok=True)


def _prepare_remote(target: Target, exist_ok: bool) -> None:
    store = target._store()
    existing = [rel for rel in store.list() if not rel.startswith(f"{STAGING_DIR}/")]
    if existing and not exist_ok:
        raise OutputExistsError(f"{target.url} already holds {existing[:5]}; write elsewhere or pass "
                                "exist_ok=True in mds_kwargs to replace it")
    if INDEX_BASENAME in existing:
        store.delete(INDEX_BASENAME)  # retract the old dataset before touching its shards
    for rel in existing:
        store.delete(rel)
