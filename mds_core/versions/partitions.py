"""Partitions: named parts of a version (a day, a region) that a later version can replace whole.

A transaction writes each partition as a complete MDS dataset under ``data/<txn>/part-<key>/``
(``Transaction.partition_out``). The manifest records ``{key: [shard basenames]}`` and every later
version carries it forward, so ``mode="replace"`` knows which shards to drop when a day is rewritten,
and ``mode="append"`` can refuse to add a day twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mds_core.errors import ConfigurationError, PartitionExistsError, StoreFileNotFoundError
from mds_core.format.index import INDEX_BASENAME, ShardInfo, check_same_columns, parse_index
from mds_core.storage.remote import RemoteStore
from mds_core.versions.head import read_if_present
from mds_core.versions.manifest import DATA, VersionInfo, check_partition_key

FOLDER_PREFIX = "part-"  # keeps a key's folder apart from the shards and index.json of a plain write


def partition_folder(transaction: str, key: str) -> str:
    """Where a transaction writes partition ``key``, relative to the root."""
    return f"{DATA}/{transaction}/{FOLDER_PREFIX}{check_partition_key(key, f'transaction {transaction}')}"


@dataclass
class Written:
    """What one transaction wrote: its shards (basenames relative to the root) and its partitions."""

    shards: list[ShardInfo]
    partitions: dict[str, list[str]] = field(default_factory=dict)


def read_written(store: RemoteStore, transaction: str, keys: list[str] | None) -> Written:
    """The shards under ``data/<transaction>/``: its ``index.json``, or its partitions' (``keys``).

    ``keys=None`` (a commit by transaction id alone) reads ``index.json`` if there is one, and
    otherwise finds the partitions in a listing of the transaction's own folder (never the history).
    """
    folder = f"{DATA}/{transaction}"
    if keys == []:
        return Written(_read_index(store, folder))
    plain = read_if_present(store, f"{folder}/{INDEX_BASENAME}")
    if plain is not None and keys is None:
        return Written([s.with_prefix(folder) for s in parse_index(plain, store.url_of(folder))])
    if plain is not None:
        raise ConfigurationError(
            f"{store.url_of(folder)}: the transaction wrote both a dataset at tx.out and "
            f"partitions {keys}; write every shard of a partitioned transaction to a partition"
        )
    keys = keys if keys is not None else _listed_keys(store, folder)
    if not keys:
        raise ConfigurationError(
            f"{store.url_of(folder)}: the transaction wrote nothing to commit: no "
            f"{INDEX_BASENAME}, and no partition (tx.partition_out)"
        )
    written = Written([])
    for key in sorted(keys):
        shards = _read_index(store, partition_folder(transaction, key), key)
        written.shards += shards
        written.partitions[key] = [s.raw_data.basename for s in shards]
    return written


def _read_index(store: RemoteStore, folder: str, key: str | None = None) -> list[ShardInfo]:
    try:
        text = store.read_bytes(f"{folder}/{INDEX_BASENAME}")
    except StoreFileNotFoundError as err:
        if key is None:
            raise
        raise ConfigurationError(
            f"{store.url_of(folder)}: partition {key!r} has no {INDEX_BASENAME}; write a "
            "complete MDS dataset there (an MDSWriter, or dataframe_to_mds with "
            "merge_index=True)"
        ) from err
    return [s.with_prefix(folder) for s in parse_index(text, store.url_of(folder))]


def _listed_keys(store: RemoteStore, folder: str) -> list[str]:
    depth = folder.count("/") + 2  # <folder>/part-<key>/index.json
    return sorted(
        name.split("/")[-2][len(FOLDER_PREFIX) :]
        for name in store.list(folder)
        if name.count("/") == depth
        and name.endswith(f"/{INDEX_BASENAME}")
        and name.split("/")[-2].startswith(FOLDER_PREFIX)
    )


def combine(
    mode: str, base: VersionInfo | None, base_shards: list[ShardInfo], written: Written, root: str
) -> tuple[list[ShardInfo], dict[str, list[str]]]:
    """The new version's shards and partitions.

    ``base_shards`` (those of ``base``, for an append or a replace) less the replaced partitions' shards, then the new
    ones, in that order.
    """
    if mode == "overwrite":
        return list(written.shards), dict(sorted(written.partitions.items()))
    if mode == "replace" and not written.partitions:
        raise ConfigurationError(
            f"{root}: mode='replace' replaces partitions, but the transaction wrote none; "
            "write them with tx.partition_out(key), or use mode='append'"
        )
    old = base.partitions if base is not None else {}
    again = sorted(set(written.partitions) & set(old))
    if mode == "append" and again:
        raise PartitionExistsError(
            f"{root}: version {base.version if base else None} already has partition(s) {again}; appending them "
            "would hold their rows twice. Use mode='replace' to replace them with the new shards"
        )
    dropped = {name for key in again for name in old[key]}
    kept = [s for s in base_shards if s.raw_data.basename not in dropped]
    partitions = {**{k: v for k, v in old.items() if k not in written.partitions}, **written.partitions}
    return kept + written.shards, dict(sorted(partitions.items()))


def check_combined(
    folder: str, shards: list[ShardInfo], written: Written, base: VersionInfo | None, transaction: str
) -> None:
    """Refuse a version with no shards, or whose shards (the base's and the written) differ in columns.

    Args:
        folder: the transaction's folder, named in the error.
        shards: the new version's shards, as ``combine`` returns them (the base's first).
        written: what the transaction wrote.
        base: the version built on.
        transaction: the transaction's name.
    """
    if not shards:
        raise ConfigurationError(f"{folder}: the transaction wrote no shards")
    kept = shards[:1] if len(shards) > len(written.shards) else []  # combine() puts the base's first
    if written.shards:  # partitions of one transaction must agree too, not only the base and the new
        check_same_columns(
            kept + written.shards,
            f"version {base.version if base else None} and transaction {transaction}",
            f"Write the same columns, or commit it with ShardSet.commit({transaction!r}, 'overwrite') to start afresh",
        )
