"""A Lightning run over a local MDS dataset, for tests/streaming/test_lightning.py: DDP on two CPU processes
over gloo, each batch's ids written to ``<trace>/rank<r>.jsonl``; ``--stop-at k`` saves a checkpoint after
step k and kills every rank; ``--resume`` continues from that checkpoint.

    python tests/clients/lightning_train.py <dataset> <cache> <trace dir> <checkpoint> [--stop-at K] [--resume]
        [--user-module]

``--user-module`` swaps ``StreamingDataModule`` for a plain user ``LightningDataModule``, built the way
Mosaic users build theirs: the dataset made in ``train_dataloader()`` (it asks the process group for
the world), a plain torch ``DataLoader``, and the dataset's state kept in the module's own
``state_dict()`` from the steps the trainer ran.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any, cast

import lightning as L
import torch

from mds_core import StreamingDataset
from mds_core.streaming.lightning import StreamingDataModule

DATASET_KWARGS: dict[str, Any] = {"shuffle": True, "shuffle_seed": 17, "num_canonical_nodes": 1}
BATCH = 8


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


class UserDataModule(L.LightningDataModule):
    """What a user writes without ``StreamingDataModule``."""

    def __init__(self, local: str) -> None:
        super().__init__()
        self.local = local
        self.dataset: StreamingDataset | None = None
        self.resume_from: dict[str, Any] | None = None

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        self.dataset = StreamingDataset(local=self.local, batch_size=BATCH, **DATASET_KWARGS)
        if self.resume_from is not None:
            self.dataset.load_state_dict(self.resume_from)
        # A torch IterableDataset at run time (registered as one once torch is loaded): mypy cannot see that.
        dataset = cast("torch.utils.data.IterableDataset[dict[str, Any]]", self.dataset)
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=1)

    def state_dict(self) -> dict[str, Any]:
        assert self.dataset is not None and self.trainer is not None
        samples = self.trainer.global_step * BATCH * self.trainer.world_size  # one epoch: steps since it began
        return self.dataset.state_dict(num_samples=samples, from_beginning=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.resume_from = state_dict  # the dataset is made later, in train_dataloader()


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("dataset", "cache", "trace", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--user-module", action="store_true")
    args = parser.parse_args()
    data: L.LightningDataModule
    if args.user_module:
        data = UserDataModule(args.dataset)
    else:
        data = StreamingDataModule(
            batch_size=BATCH, loader_kwargs={"num_workers": 1}, local=args.dataset, **DATASET_KWARGS
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
