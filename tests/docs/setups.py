"""What a page's examples assume exists before they run, made explicitly (run in the page's process).

Each function writes into the current directory, the page's scratch workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

DIGITS_START = "2026-01-01"  # pipelines/defs/digits/defs.yaml's start_date
DIGITS_ROWS_PER_DAY = 180  # and its rows_per_day
DIGITS_DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


def digits_rows(day: str) -> list[dict]:
    """The rows the pipeline's digits source gives ``day`` (pipelines.assets.raw.digits_day, without Spark)."""
    import datetime as dt

    from sklearn.datasets import load_digits

    digits = load_digits()
    first = (dt.date.fromisoformat(day) - dt.date.fromisoformat(DIGITS_START)).days * DIGITS_ROWS_PER_DAY
    picked = [(row, row % len(digits.target)) for row in range(first, first + DIGITS_ROWS_PER_DAY)]
    return [
        {"id": row, "label": int(digits.target[i]), "pixels": digits.images[i].ravel().astype(np.int8), "day": day}
        for row, i in picked
    ]


def digits_shard_set(root: str = "data/shard-sets/digits", days: tuple[str, ...] = DIGITS_DAYS) -> str:
    """The digits shard set as the pipeline writes it with one writer task: each day a partition
    (``data/<txn>/part-<day>/00000/``, zstd, 1 MiB shards); version 1 holds the first two days, version 2
    appends the third and is published."""
    from mds_core import MDSWriter, merge_index
    from mds_core.versions import ShardSet

    columns = {"id": "int64", "label": "int32", "pixels": "ndarray:int8:64", "day": "str"}
    shard_set = ShardSet(root)
    for run in (days[:-1], days[-1:]):
        known = [d for v in shard_set.versions() for d in v.lineage.get("days", [])]
        lineage = {"dataset": "digits", "days": sorted(set(known) | set(run)), "added_days": list(run)}
        with shard_set.transaction("append", lineage=lineage, base="published") as tx:
            for day in run:
                out = tx.partition_out(day)
                with MDSWriter(out=f"{out}/00000", columns=columns, compression="zstd", size_limit="1mb") as writer:
                    for row in digits_rows(day):
                        writer.write(row)
                merge_index(out)
    return root


def published_history(root: str = "data/shard-sets/digits", versions: int = 7) -> str:
    """A shard set of ``versions`` small versions, each published in turn (so each has one to roll back to)."""
    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    shard_set = ShardSet(root)
    for number in range(1, versions + 1):
        with shard_set.transaction("append") as tx, MDSWriter(out=tx.out, columns={"id": "int"}) as writer:
            for i in range(10):
                writer.write({"id": 10 * number + i})
    return root


def small_dataset(out: str, rows: int = 1000, shard_rows: int = 100) -> str:
    """``rows`` samples of an ``id`` and a few tokens, about ``shard_rows`` a shard."""
    from mds_core import MDSWriter

    columns = {"id": "int", "tokens": "ndarray:uint16:16"}
    with MDSWriter(out=out, columns=columns, size_limit=shard_rows * 48) as writer:
        for i in range(rows):
            writer.write({"id": i, "tokens": np.full(16, i % 65536, np.uint16)})
    return out


def moto_s3(*buckets: str):
    """A loopback S3 server (moto) for URLs such as ``s3://bucket/...``, with ``buckets`` created and this
    process's environment (so the commands it starts too) pointed at it. Stopped when the process exits."""
    import atexit

    import boto3

    from testsupport.s3 import MotoServer, s3_env

    Path("moto").mkdir(exist_ok=True)
    server = MotoServer(Path("moto"), count_requests=False)  # nothing counts requests here
    atexit.register(server.stop)
    os.environ.update(s3_env(server.endpoint))
    client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
    for bucket in buckets:
        client.create_bucket(Bucket=bucket)
    return server


def upload(folder: str, url: str) -> str:
    """Every file under ``folder`` to the same place under ``url``."""
    from mds_core.storage.remote import open_store

    store = open_store(url)
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            store.upload(str(path), path.relative_to(folder).as_posix())
    return url


def tokens_index(out: str, samples: int = 20_000, tokens: int = 2048, size_limit: int = 16 << 20) -> str:
    """The index of ``samples`` samples of ``int32[tokens]`` in shards of ``size_limit`` bytes, exactly as
    MDSWriter lays them out, and its shard files as sparse files of those sizes: ``mds plan`` reads the
    index and checks that the files are there at the sizes it gives, but reads none of them."""
    import json

    from mds_core import MDSWriter

    Path(out).mkdir(parents=True)
    scratch = Path(out) / "one"
    with MDSWriter(out=str(scratch), columns={"tokens": f"ndarray:int32:{tokens}"}, size_limit=size_limit) as writer:
        writer.write({"tokens": np.zeros(tokens, np.int32)})
    index = json.loads((scratch / "index.json").read_text())
    [entry] = index["shards"]
    sample = 4 * tokens + 4  # the values and the sample's offset entry
    fixed = entry["raw_data"]["bytes"] - sample  # the count, the first offset and the header
    per_shard = (size_limit - fixed) // sample
    shards: list[dict[str, object]] = []
    left = samples
    while left:
        n = min(per_shard, left)
        raw = {**entry["raw_data"], "basename": f"shard.{len(shards):05}.mds", "bytes": fixed + n * sample}
        shards.append({**entry, "raw_data": raw, "samples": n})
        with open(Path(out, raw["basename"]), "wb") as file:
            file.truncate(raw["bytes"])  # sparse: takes no disk
        left -= n
    (Path(out) / "index.json").write_text(json.dumps({**index, "shards": shards}, sort_keys=True))
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return out
