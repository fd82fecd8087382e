"""Where ``dataframe_to_mds`` writes: staging per task attempt, commit of the winners, index last.

Every attempt writes below ``<out>/_staging/<run>/<partition>.<attempt>``; ``Target.commit`` moves
each partition's winning attempt to ``<out>/<partition:05>``, removes the rest of the run's staging
tree and then publishes the merged ``index.json``, so a reader never sees a half-written dataset
and retried or speculative attempts leave no orphans. Works for local paths and remote URLs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any

from mds_core.convert.route import Route
from mds_core.convert.table import ConversionStats
from mds_core.errors import ConfigurationError, OutputExistsError
from mds_core.format.index import INDEX_BASENAME, dumps_merged_index, parse_index
from mds_core.storage.files import atomic_write, fsync_directory
from mds_core.storage.kill_points import kill_point
from mds_core.storage.remote import RemoteStore, open_store

STAGING_DIR = "_staging"


class Target:
    """The converter's output location: where staging lives, how attempts are committed.

    ``route`` says where the dataset's home is (``url``: an absolute path or a URL) and whether it is
    remote (executors then stage locally and upload); ``local`` is the driver's directory for a copy
    of the merged ``index.json`` (``out=(local, remote)``), if any.
    """

    def __init__(self, route: Route, local: str | None) -> None:
        self.route = route
        self.url = route.url
        self.remote = route.remote
        self.local = local
        self._remote_store: RemoteStore | None = None

    def staging_location(self, run: str) -> str:
        """Where the executors stage run ``run``'s attempts: a folder under the output."""
        if self.remote:
            return f"{self.url}/{STAGING_DIR}/{run}"
        return os.path.join(self.url, STAGING_DIR, run)

    def commit(self, manifests: list[dict[str, Any]], staging: str, merge: bool) -> ConversionStats:
        """Move each partition's winning attempt into place, drop the rest, publish index.json last."""
        stats = ConversionStats()
        shards = []
        self._check_attempts_visible(manifests, staging)
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

    def _check_attempts_visible(self, manifests: list[dict[str, Any]], staging: str) -> None:
        """Before moving anything.

        Every attempt the executors wrote must be here (a local ``out`` that an executor wrote on its own disk is not),
        else nothing is committed.
        """
        if self.remote:
            return
        missing = [
            m["staging"]
            for m in manifests
            if m["index"] and parse_index(m["index"], "") and not os.path.isdir(f"{staging}/{m['staging']}")
        ]
        if missing:
            self.discard(staging)
            raise ConfigurationError(
                f"the executors wrote {len(missing)} partition(s) under {self.url} (e.g. {missing[0]}) that this "
                "driver cannot see: a local out must be one shared directory mounted at the same path on the "
                "driver and every executor; otherwise write to a URL (s3://, gs://, ...). Nothing was committed."
            )

    def _move_attempt(self, attempt: str, name: str, files: list[str]) -> None:
        if not self.remote:
            os.replace(attempt, os.path.join(self.url, name))  # its files were made durable as written
            fsync_directory(self.url)
            kill_point(f"moved partition {name} into place")
            return
        store = self._store()
        rel = attempt[len(self.url) + 1 :]
        for basename in [*files, INDEX_BASENAME]:  # the partition's index last
            store.move(f"{rel}/{basename}", f"{name}/{basename}")

    def _publish(self, rel: str, data: bytes) -> None:
        if self.remote:
            self._store().write_bytes(rel, data)
        else:
            atomic_write(os.path.join(self.url, rel), [data])
        if self.local:
            atomic_write(os.path.join(self.local, rel), [data])

    def discard(self, staging: str) -> None:
        """Remove a run's staging tree (losing attempts included), and ``_staging`` once empty."""
        if self.remote:
            self._store().delete_tree(staging[len(self.url) + 1 :])
            return
        shutil.rmtree(staging, ignore_errors=True)
        kill_point(f"removed the staging tree {os.path.basename(staging)}")
        with contextlib.suppress(OSError):  # another run's staging is still there
            os.rmdir(os.path.dirname(staging))

    def local_result(self, keep_local: bool) -> str:
        """The reference's first return value: the local directory (removed unless ``keep_local``)."""
        if self.local is None:
            return self.url
        if not keep_local:
            shutil.rmtree(self.local, ignore_errors=True)
        return self.local

    def _store(self) -> RemoteStore:
        if self._remote_store is None:
            self._remote_store = open_store(self.url)
        return self._remote_store


def open_target(route: Route, exist_ok: bool) -> Target:
    """Refuse (or, with ``exist_ok``, clear) a location that already holds data; the ``Target`` to write."""
    if route.location.remote is None:
        target = Target(route, None)
        _prepare_local(target.url, exist_ok)
        return target
    local = route.location.local or tempfile.mkdtemp(prefix="mds-driver-")
    os.makedirs(local, exist_ok=True)
    target = Target(route, local)
    if target.remote:
        _prepare_remote(target, exist_ok)
    else:
        _prepare_local(target.url, exist_ok)
    return target


def _prepare_local(path: str, exist_ok: bool) -> None:
    existing = [name for name in os.listdir(path) if name != STAGING_DIR] if os.path.isdir(path) else []
    if existing and not exist_ok:
        raise OutputExistsError(
            f"{path} already holds {sorted(existing)[:5]}; write elsewhere or pass "
            "exist_ok=True in mds_kwargs to replace it"
        )
    # The old index goes first: a crash halfway never leaves it naming shards that are gone.
    for name in sorted(existing, key=lambda n: n != INDEX_BASENAME):
        full = os.path.join(path, name)
        shutil.rmtree(full) if os.path.isdir(full) and not os.path.islink(full) else os.unlink(full)
        kill_point(f"removed the old {name}")
    if exist_ok:  # staging left by runs that died before their commit: this run replaces them all
        shutil.rmtree(os.path.join(path, STAGING_DIR), ignore_errors=True)
    os.makedirs(path, exist_ok=True)


def _prepare_remote(target: Target, exist_ok: bool) -> None:
    store = target._store()
    existing = [rel for rel in store.list() if not rel.startswith(f"{STAGING_DIR}/")]
    if existing and not exist_ok:
        raise OutputExistsError(
            f"{target.url} already holds {existing[:5]}; write elsewhere or pass "
            "exist_ok=True in mds_kwargs to replace it"
        )
    if INDEX_BASENAME in existing:
        store.delete(INDEX_BASENAME)  # retract the old dataset before touching its shards
    for rel in existing:
        store.delete(rel)
    if exist_ok:  # staging left by runs that died before their commit: this run replaces them all
        store.delete_tree(STAGING_DIR)
