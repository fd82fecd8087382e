"""The training function of the TorchDistributor and Lightning tests: what docs/databricks.md shows.

It runs in each process TorchDistributor starts (torchrun's ranks), so it sets the workspace credentials
itself: a process started by torchrun on an executor does not see the notebook's environment. It
streams a Volume with ``StreamingDataset`` and ``StreamingDataLoader``, trains a small model under
DDP over gloo, writes each batch's ids to ``trace_dir/rank<r>.jsonl``, and after every step saves the
loader's state (rank 0) beside the model's. With ``stop_after=k`` every rank kills itself after step k's
checkpoint, as a preempted node would; a run given the same ``checkpoint`` resumes from it.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any


def train(
    host: str,
    token: str,
    remote: str,
    cache: str,
    trace_dir: str,
    checkpoint: str,
    stop_after: int | None = None,
    batch_size: int = 8,
) -> dict[str, Any]:
    os.environ["DATABRICKS_HOST"], os.environ["DATABRICKS_TOKEN"] = host, token
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from mds_core import StreamingDataLoader, StreamingDataset

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # One cache per node: in TorchDistributor's distributed mode each Spark task is a torchrun node
    # (GROUP_RANK), and here those nodes share one disk.
    local = os.path.join(cache, f"node{os.environ.get('GROUP_RANK', '0')}")
    dataset = StreamingDataset(
        remote=remote, local=local, batch_size=batch_size, shuffle=True, shuffle_seed=17, num_canonical_nodes=1
    )
    loader = StreamingDataLoader(dataset, batch_size=batch_size, num_workers=1)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint, weights_only=False)
        loader.load_state_dict(state["loader"])
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    losses = []
    with open(os.path.join(trace_dir, f"rank{rank}.jsonl"), "a") as trace:
        for step, batch in enumerate(loader, start=1):
            trace.write(json.dumps(batch["id"].tolist()) + "\n")
            trace.flush()
            features = batch["features"].float()
            loss = torch.nn.functional.mse_loss(model(features).squeeze(1), features.sum(1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            _checkpoint(rank, checkpoint, loader, model, optimizer)
            if stop_after is not None and step == stop_after:
                dist.barrier()  # every rank's trace and rank 0's checkpoint are on disk
                os.kill(os.getpid(), signal.SIGKILL)
    dist.destroy_process_group()
    return {"rank": rank, "steps": len(losses), "losses": losses}


def _checkpoint(rank: int, path: str, loader: Any, model: Any, optimizer: Any) -> None:
    import torch

    state = loader.state_dict()  # every rank calls it: it may gather across ranks
    if rank == 0:
        torch.save({"loader": state, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)


def write_training_set(remote: str, rows: int) -> None:
    """The dataset ``train`` reads: ids and four features, in shards of 1 KiB (many shards, many downloads)."""
    import numpy as np

    from mds_core import MDSWriter

    with MDSWriter(out=remote, columns={"id": "int64", "features": "ndarray:float32:4"}, size_limit=1 << 10) as out:
        for i in range(rows):
            out.write({"id": i, "features": np.array([i % 5, 1, 2, i % 3], dtype=np.float32)})


def read_trace(trace_dir: str, ranks: int) -> dict[int, list[list[int]]]:
    """Each rank's batches (lists of ids), in order, from ``trace_dir/rank<r>.jsonl``."""
    return {
        r: [json.loads(line) for line in open(os.path.join(trace_dir, f"rank{r}.jsonl")).read().splitlines()]
        for r in range(ranks)
    }
