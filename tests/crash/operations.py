"""The operations the kill-point tests interrupt, each run in its own process.

``python -m tests.crash.operations OP JSON``: with ``MDS_KILL_LOG`` set, every step the operation
takes is logged, and with ``MDS_KILL_AT=k`` the process SIGKILLs itself at step ``k``
(``mds_core.storage.kill_points``). The test process sets the stage before and checks after.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from typing import Any

COLUMNS = {"id": "int", "day": "str"}
WRITER_OPTIONS: dict[str, Any] = {"columns": COLUMNS, "size_limit": 400, "hashes": ["xxh64"]}


def write_rows(out: str, ids: range, **extra: Any) -> None:
    """A small dataset of several shards, with digests, so a damaged file is always detectable."""
    from mds_core import MDSWriter

    with MDSWriter(out=out, **{**WRITER_OPTIONS, **extra}) as writer:
        for i in ids:
            writer.write({"id": i, "day": f"day-{i // 10}"})


def commit(args: dict[str, Any]) -> None:
    from mds_core.versions import ShardSet

    with ShardSet(args["root"]).transaction("append") as tx:
        write_rows(tx.out, range(*args["ids"]))


def publish(args: dict[str, Any]) -> None:
    from mds_core.versions import ShardSet

    ShardSet(args["root"]).publish(args["version"])


def vacuum(args: dict[str, Any]) -> None:
    from mds_core.versions import ShardSet

    ShardSet(args["root"]).vacuum(keep_last=args["keep_last"], grace=dt.timedelta(0))


def upload(args: dict[str, Any]) -> None:
    write_rows(args["out"], range(*args["ids"]), exist_ok=True)


def epoch(args: dict[str, Any]) -> None:
    """One pass over a remote dataset through a cache too small to hold it: downloads and evictions."""
    print(json.dumps(epoch_ids(args)))


def epoch_ids(args: dict[str, Any]) -> list[int]:
    """Every sample id of ``args["remote"]`` in order, read through the cache of ``args["local"]``."""
    from mds_core import StreamingDataset

    dataset = StreamingDataset(
        remote=args["remote"],
        local=args["local"],
        cache_limit=args["cache_limit"],
        batch_size=1,
        shuffle=False,
        job_root=args["job_root"],
        validate_hash="xxh64",
    )
    return [int(sample["id"]) for sample in dataset]


def convert_prepare(args: dict[str, Any]) -> None:
    """The driver's first step of ``dataframe_to_mds(..., exist_ok=True)``: clear the old output."""
    from mds_core.convert.route import route_for
    from mds_core.convert.staging import open_target

    open_target(route_for(args["out"], connect=False), exist_ok=True)


def convert_commit(args: dict[str, Any]) -> None:
    """The driver's last step of ``dataframe_to_mds`` once its tasks have written their staging
    attempts: move each partition's winning attempt into place, then publish the merged index."""
    from mds_core.convert.route import route_for
    from mds_core.convert.staging import Target

    Target(route_for(args["out"], connect=False), None).commit(args["manifests"], args["staging"], True)


OPERATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "commit": commit,
    "publish": publish,
    "vacuum": vacuum,
    "upload": upload,
    "epoch": epoch,
    "convert_prepare": convert_prepare,
    "convert_commit": convert_commit,
}

if __name__ == "__main__":
    OPERATIONS[sys.argv[1]](json.loads(sys.argv[2]))
