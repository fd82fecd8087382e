"""``StreamingDataModule``: ``StreamingDataset`` as a PyTorch Lightning ``LightningDataModule``.

Lightning's DDP launcher starts each rank with ``LOCAL_RANK`` and ``WORLD_SIZE`` only, not ``RANK``, and
before the process group exists; a dataset built at the top of the script would see an impossible
world (rank 0 with local rank 1) and refuse it. So the module builds the dataset in
``train_dataloader()``, after the strategy has joined the process group, which the dataset asks.

The loader is a ``StreamingDataLoader``, which Lightning's fit loop treats as stateful: a checkpoint
saved mid-epoch holds its ``state_dict()`` and restoring it resumes the epoch where the checkpoint
was taken. Lightning fetches one batch ahead of the step it runs, so the state counts the steps the
loop has run, not the batches the loader has handed out.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

from mds_core.streaming.dataset import StreamingDataset
from mds_core.streaming.loader import StreamingDataLoader


class _TrainingLoader(StreamingDataLoader):
    """The module's loader: its state counts the steps the trainer's fit loop has run."""

    def __init__(self, module: StreamingDataModule, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module = module

    def _samples_consumed(self) -> int:
        trainer = self._module.trainer
        if trainer is None:
            return super()._samples_consumed()
        # processed: the steps that ran; a checkpoint saved in on_train_batch_end (ModelCheckpoint's
        # place) comes before the step counts as completed, and after the next batch was fetched.
        progress: Any = trainer.fit_loop.epoch_loop.batch_progress.current  # typed as its base class
        return int(progress.processed) * (self.batch_size or 1)


class StreamingDataModule(pl.LightningDataModule):
    """A ``LightningDataModule`` whose training data is a ``StreamingDataset``.

    Args:
        batch_size: the per-rank batch size, given to both the dataset and the loader.
        loader_kwargs: more arguments of ``StreamingDataLoader`` (``num_workers``, ``pin_memory``...).
        **dataset_kwargs: the arguments of ``StreamingDataset`` (``remote``, ``local``, ``shuffle``...).
    """

    def __init__(self, batch_size: int, loader_kwargs: dict[str, Any] | None = None, **dataset_kwargs: Any) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.loader_kwargs = dict(loader_kwargs or {})
        self.dataset_kwargs = dataset_kwargs

    def train_dataloader(self) -> StreamingDataLoader:
        """A fresh StreamingDataLoader over a new StreamingDataset built from the module's arguments."""
        dataset = StreamingDataset(batch_size=self.batch_size, **self.dataset_kwargs)
        return _TrainingLoader(self, dataset, batch_size=self.batch_size, **self.loader_kwargs)
