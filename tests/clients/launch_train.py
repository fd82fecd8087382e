"""A training loop over a local MDS dataset on 2 CPU ranks over gloo, under a launcher that states less than
torchrun does, for tests/streaming/test_launchers.py. Each rank appends its batches' ids to
``<work>/trace/rank<r>.jsonl``; ``--stop-at k`` saves the loader's state after step k (``<work>/state.json``)
and stops every rank; ``--resume`` continues from it.

    python tests/clients/launch_train.py spawn <dataset> <work> [--stop-at K] [--resume]
    accelerate launch --multi_gpu --num_processes 2 tests/clients/launch_train.py accelerate <dataset> <work> ...

``spawn``: ``torch.multiprocessing.spawn`` with ``init_process_group(rank=..., world_size=2)``, no
variables set. ``accelerate``: ``Accelerator`` joins the group; the loader is not ``prepare``d, because
the dataset splits the epoch over the ranks itself (docs/differences.md).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mds_core import StreamingDataLoader, StreamingDataset

WORLD_SIZE, BATCH = 2, 8


def train(args: argparse.Namespace) -> None:
    """One rank's loop, after it joined the process group."""
    work = Path(args.work)
    dataset = StreamingDataset(
        local=args.dataset, batch_size=BATCH, shuffle=True, shuffle_seed=17, job_root=str(work / "jobs")
    )
    loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=args.workers)
    if args.resume:
        loader.load_state_dict(json.loads((work / "state.json").read_text()))
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    trace = work / "trace" / f"rank{dist.get_rank()}.jsonl"
    for step, batch in enumerate(loader, start=1):
        with trace.open("a") as out:
            out.write(json.dumps(batch["id"].tolist()) + "\n")
        loss = model(batch["id"].float().unsqueeze(1)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == args.stop_at:
            if dist.get_rank() == 0:
                (work / "state.json").write_text(json.dumps(loader.state_dict()))
            break
    dist.barrier()


def spawned_rank(rank: int, port: int, args: argparse.Namespace) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        train(args)
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("launcher", choices=["spawn", "accelerate"])
    parser.add_argument("dataset")
    parser.add_argument("work")
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    (Path(args.work) / "trace").mkdir(parents=True, exist_ok=True)
    if args.launcher == "spawn":
        assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ  # the case this launcher tests
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        mp.spawn(  # type: ignore[attr-defined]  # torch.multiprocessing re-exports spawn without __all__
            spawned_rank, args=(port, args), nprocs=WORLD_SIZE
        )
    else:
        from accelerate import Accelerator

        Accelerator(cpu=True)  # joins the process group accelerate launch prepared
        train(args)


if __name__ == "__main__":
    main()
