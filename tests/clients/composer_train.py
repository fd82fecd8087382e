"""Composer's ``Trainer`` over a local MDS dataset on 2 CPU ranks, started by Composer's own launcher, for
tests/streaming/test_composer.py (in the client environment .cache/clients/composer). Each rank appends its
batches' ids to ``<work>/trace/rank<r>.jsonl``. ``--stop-at k`` trains k batches and saves Composer's
checkpoint there; ``--resume`` loads it and finishes the epoch. Composer keeps the dataset's
``state_dict(num_samples, from_beginning=True)`` in its checkpoints and hands it back to
``load_state_dict`` on resume, as it does for Mosaic's dataset.

    composer -n 2 tests/clients/composer_train.py <dataset> <work> [--stop-at K | --resume]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, cast

import torch
from composer import Trainer
from composer.models import ComposerModel
from composer.utils import dist

from mds_core import StreamingDataset

BATCH = 8


class Model(ComposerModel):
    def __init__(self, trace_dir: Path) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.trace_dir = trace_dir

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        with (self.trace_dir / f"rank{dist.get_global_rank()}.jsonl").open("a") as trace:
            trace.write(json.dumps(batch["id"].tolist()) + "\n")
        return self.layer(batch["id"].float().unsqueeze(1))

    def loss(self, outputs: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        return outputs.pow(2).mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("work")
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    work = Path(args.work)
    (work / "trace").mkdir(parents=True, exist_ok=True)
    dataset = StreamingDataset(
        local=args.dataset, batch_size=BATCH, shuffle=True, shuffle_seed=17, job_root=str(work / "jobs")
    )
    model = Model(work / "trace")
    # A torch IterableDataset at run time (registered as one once torch is loaded): mypy cannot see that.
    torch_dataset = cast("torch.utils.data.IterableDataset[dict[str, Any]]", dataset)
    trainer = Trainer(
        model=model,
        train_dataloader=torch.utils.data.DataLoader(torch_dataset, batch_size=BATCH, num_workers=1),
        max_duration=f"{args.stop_at}ba" if args.stop_at else "1ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        device="cpu",
        save_folder=str(work / "checkpoints"),
        save_filename="ba{batch}-rank{rank}.pt",
        save_interval=f"{args.stop_at}ba" if args.stop_at else "1ep",
        load_path=str(work / "checkpoints" / "latest-rank0.pt") if args.resume else None,
        progress_bar=False,
        log_to_console=False,
        loggers=[],
    )
    trainer.fit()


if __name__ == "__main__":
    main()
