"""A retried commit: the version that committed a transaction already, if any.

``ShardSet.commit`` asks first, so that a process that died after committing but before returning
gets its version back on the retry instead of committing the same shards a second time.
"""

from __future__ import annotations

from collections.abc import Callable

from mds_core.storage.remote import RemoteStore
from mds_core.versions.head import manifest_if_present
from mds_core.versions.manifest import VERSIONS, VersionInfo, created_before, is_version_number, manifest_name
from mds_core.versions.numbering import CLOCK_SKEW, transaction_started


def committed_as(
    store: RemoteStore,
    transaction: str,
    found: list[VersionInfo],
    floor: int | None,
    version: Callable[[int], VersionInfo],
) -> VersionInfo | None:
    """The version that committed ``transaction`` already, if any, without listing the history.

    Only versions newer than ``floor`` (the newest the writer saw) can be it; when that is not
    known, those created since the transaction started (its id is stamped) can. ``found`` holds the
    manifests already read (the newest last); ``version`` reads another one.
    """
    started = transaction_started(transaction) if floor is None else None
    if floor is None and started is None:  # an id not made by Transaction: one listing answers
        return committed_in_listing(store, transaction, version)
    cutoff = None if started is None else started - CLOCK_SKEW  # known exactly when floor is not
    known = {v.version: v for v in found}
    for number in range(found[-1].version if found else 0, floor or 0, -1):
        info = known.get(number) or manifest_if_present(store, number)
        if info is not None and info.transaction == transaction:
            return info
        if cutoff is not None and (info is None or created_before(info, cutoff)):
            return None  # older than the transaction (or below a gap vacuum made): it cannot be one
    return None


def committed_in_listing(
    store: RemoteStore, transaction: str, version: Callable[[int], VersionInfo]
) -> VersionInfo | None:
    """A version's index is named after its transaction, so a listing answers without reading manifests."""
    listing = set(store.list(VERSIONS))
    for name in listing:
        number, _, rest = name[len(VERSIONS) + 1 :].partition(".")
        if rest == f"{transaction}.index.json" and is_version_number(number) and manifest_name(int(number)) in listing:
            return version(int(number))
    return None
