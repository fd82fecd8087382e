"""The training loop of ``bench_torch_distributor.py``: one epoch of ``StreamingDataLoader`` over a Volume,
each batch's payload consumed by the harness's ``Consumer``, no model (the loader is what is measured).

Run by ``TorchDistributor.run(loop, ...)`` and, as a script, by plain ``torchrun``:

    torchrun --standalone --nnodes=1 --nproc_per_node=2 benchmarks/torch_train.py HOST TOKEN REMOTE CACHE OUT
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def loop(host: str, token: str, remote: str, cache: str, out: str, batch_size: int = 64) -> dict[str, Any]:
    os.environ["DATABRICKS_HOST"], os.environ["DATABRICKS_TOKEN"] = host, token
    import torch.distributed as dist

    from benchmarks.harness import Consumer
    from mds_core import StreamingDataLoader, StreamingDataset

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    started = time.perf_counter()
    dataset = StreamingDataset(remote=remote, local=cache, batch_size=batch_size, shuffle=True, shuffle_seed=3)
    loader = StreamingDataLoader(dataset, batch_size=batch_size, num_workers=1)
    consume, samples = Consumer(), 0
    for batch in loader:
        consume(batch)
        samples += len(batch["id"])
    seconds = time.perf_counter() - started
    dist.barrier()
    report = {"rank": rank, "samples": samples, "seconds": seconds, "bytes": consume.consumed}
    with open(f"{out}.rank{rank}.json", "w") as file:
        json.dump(report, file)
    dist.destroy_process_group()
    return report


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    host, token, remote, cache, out = sys.argv[1:6]
    loop(host, token, remote, cache, out)
