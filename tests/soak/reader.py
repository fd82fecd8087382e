"""One reader rank of the soak (``tests/soak/soak.py`` starts it with torchrun-style env vars).

Usage: python -m tests.soak.reader CONFIG_JSON

It streams the pinned shard-set version through a ``StreamingDataLoader`` with persistent workers
(so each worker is one long-lived process whose resources the soak can follow), epoch after epoch,
and writes ``rank<R>-epoch<E>.json`` (the ids it got, the loader's telemetry) after each. The ranks
agree over gloo on whether to run another epoch, so every rank reads the same number of epochs and
each epoch can be checked for exactly-once over all of them.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mds_core import Stream, StreamingDataLoader, StreamingDataset


def run(config: dict[str, Any]) -> int:
    rank = int(os.environ["RANK"])
    out = Path(config["out"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=config["barrier_timeout"]))
    stream = Stream(remote=config["root"], local=config["local"], version=config["version"])
    dataset = StreamingDataset(
        streams=[stream],
        batch_size=config["batch_size"],
        shuffle=True,
        shuffle_algo=config["shuffle_algo"],
        num_canonical_nodes=config["canonical_nodes"] or None,  # 0: the default
        cache_limit=config["cache_limit"],
        download_retry=config["download_retry"],
        download_timeout=config["download_timeout"],
        job_root=config["job_root"],
    )
    loader = StreamingDataLoader(
        dataset,
        batch_size=config["batch_size"],
        num_workers=config["workers"],
        persistent_workers=config["workers"] > 0,
    )
    epoch = 0
    while True:
        started = time.monotonic()
        ids: list[int] = []
        for batch in loader:
            ids.extend(batch["id"].tolist())
        record = {
            "rank": rank,
            "epoch": epoch,
            "seconds": time.monotonic() - started,
            "finished": time.time(),
            "ids": ids,
            "metrics": loader.metrics(),
        }
        (out / f"rank{rank}-epoch{epoch}.json").write_text(json.dumps(record))
        epoch += 1
        # Wall-clock deadline: the same instant for every rank, so they (almost always) agree anyway.
        stop = epoch >= config["max_epochs"] or (epoch >= config["min_epochs"] and time.time() >= config["deadline"])
        flag = torch.tensor([1 if stop else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # any rank stopping stops all: equal epoch counts
        if flag.item():
            break
    dist.destroy_process_group()
    return epoch


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    rank = int(os.environ["RANK"])
    try:
        epochs = run(config)
    except BaseException:
        # The soak reports the error (a StorageError inside the retry budget is a finding), not just a code.
        (Path(config["out"]) / f"rank{rank}-error.txt").write_text(traceback.format_exc())
        raise
    (Path(config["out"]) / f"rank{rank}-done.json").write_text(json.dumps({"epochs": epochs}))


if __name__ == "__main__":
    main()
