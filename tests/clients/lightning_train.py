"""A Lightning run over a local MDS dataset, for tests/streaming/test_lightning.py: DDP on two CPU processes
over gloo, each batch's ids written to ``<trace>/rank<r>.jsonl``; ``--stop-at k`` saves a checkpoint after
step k and kills every rank; ``--resume`` continues from that checkpoint.

    python tests/clients/lightning_train.py <dataset> <cache> <trace dir> <checkpoint> [--stop-at K] [--resume]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any

import lightning as L
import torch

from mds_core.streaming.lightning import StreamingDataModule


class Model(L.LightningModule):
    def __init__(self, trace_dir: str) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.trace_dir = trace_dir

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        with open(os.path.join(self.trace_dir, f"rank{self.global_rank}.jsonl"), "a") as trace:
            trace.write(json.dumps(batch["id"].tolist()) + "\n")
        features = batch["features"].float()
        return torch.nn.functional.mse_loss(self.layer(features).squeeze(1), features.sum(1))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class KillAfter(L.Callback):
    """A preempted node: the checkpoint of step k is saved, then every rank dies."""

    def __init__(self, step: int, path: str) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)
            trainer.strategy.barrier()
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("dataset", "cache", "trace", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    data = StreamingDataModule(
        batch_size=8,
        loader_kwargs={"num_workers": 1},
        local=args.dataset,
        shuffle=True,
        shuffle_seed=17,
        num_canonical_nodes=1,
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=1,
        callbacks=[KillAfter(args.stop_at, args.checkpoint)] if args.stop_at else [],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Model(args.trace), datamodule=data, ckpt_path=args.checkpoint if args.resume else None)


if __name__ == "__main__":
    main()
