"""A remote stream's client opened in the main process before DataLoader workers fork, for them to take over.

A worker that downloads shards needs a client. Built in the worker, an S3 one costs about 0.4 s of CPU
and 30 MiB there (importing s3fs, a session, the parsed S3 API model; botocore alone for its reader, less), in
every worker. Built once in the rank before the fork, every worker makes its client from the inherited session
instead (``StoreKind.reopen_options``, ``StoreKind.reader``) and shares the imported modules copy-on-write
(measured in ``benchmarks/bench_scale.py --store s3``). A stream whose shards are all cached opens
nothing: its workers never build a client. Opening it here is only a head start: if it fails, each
worker opens its own as before and reports the failure, naming the URL, as it always did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any


def open_clients_for_workers(readers: Iterable[Any]) -> None:
    """Open the client of each remote stream in ``readers`` that still has a shard to download.

    Call it in the process that is about to fork workers. Only stores whose kind hands a session over
    to a forked child (``reopen_options``) are opened: the others' workers would build their own anyway.
    """
    for reader in readers:
        cache = getattr(reader, "shard_cache", None)
        if cache is None or cache.store.kind.reopen_options is None:
            continue
        if all(cache.is_ready(shard_id) for shard_id in range(len(cache.shards))):
            continue
        with contextlib.suppress(Exception):  # the workers open their own and report what failed
            cache.store.connect()
