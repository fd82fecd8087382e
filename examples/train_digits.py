"""Train a small digit classifier from the published version of the digits shard set.

    python examples/train_digits.py --epochs 5                      # where `make demo` publishes, published version
    python examples/train_digits.py --remote s3://bucket/shard-sets/digits --local ~/.cache/mds/digits

It pins the version it starts on and keeps it in the checkpoint with the model, the optimizer, the
loader's state and the step, so a restarted run (``--checkpoint`` again) continues mid-epoch on exactly the
same data, even if a newer version has been published since. ``--stop-after-steps N`` simulates a crash
after N steps; ``--fresh`` starts a new run even if the checkpoint is left from an earlier one.

It prints one line per event: steps count from 1 across the whole run, epochs from 0 as the loader's
``state_dict()`` counts them, and ``sample`` is the loader's ``sample_in_epoch``::

    starting a new run on version 3 of .../digits (5 epochs); checkpoint data/run.pt
    epoch 0 done at step 17: loss 1.7789 over 540 samples of version 3
    stopping after step 20 (epoch 1, sample 96) as --stop-after-steps asks; data/run.pt holds the checkpoint
    resuming data/run.pt at step 21 (epoch 1, sample 96) on version 3
    epoch 1 done at step 34: loss 0.5766 over 540 samples of version 3

Only ``mds_core`` and ``torch`` are needed: this is what training code looks like.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from torch import nn

from mds_core import StreamingDataLoader, StreamingDataset
from mds_core.versions import ShardSet

PROJECT = Path(__file__).resolve().parent.parent


def default_remote() -> str:
    """Where `make demo` publishes: ``$MDS_SHARD_STORE/digits``, else ``<$MDS_DATA_DIR or data/>/shard-sets/digits``."""
    store = os.environ.get("MDS_SHARD_STORE")
    if store:
        return store.rstrip("/") + "/digits"
    return str(Path(os.environ.get("MDS_DATA_DIR") or PROJECT / "data").resolve() / "shard-sets" / "digits")


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def batch_tensors(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    pixels = torch.as_tensor(batch["pixels"]).float() / 16.0  # digits' pixels are 0-16
    return pixels.reshape(len(pixels), 64), torch.as_tensor(batch["label"]).long()


def save(path: Path, state: dict) -> None:
    """Write the checkpoint atomically: a crash while saving keeps the previous one."""
    partial = path.with_suffix(".partial")
    torch.save(state, partial)
    os.replace(partial, path)


def load_checkpoint(args: argparse.Namespace) -> dict | None:
    """The run to continue, or None for a new one (``--fresh``, or no checkpoint yet)."""
    if args.fresh or not args.checkpoint.exists():
        return None
    checkpoint = torch.load(args.checkpoint, weights_only=False)
    if "step" not in checkpoint:  # written before checkpoints kept the step: its count cannot be recovered
        raise SystemExit(f"{args.checkpoint} is from an older train_digits.py (no step count): pass --fresh")
    return checkpoint


def say_finished(args: argparse.Namespace, checkpoint: dict) -> None:
    """Say so when there is nothing to resume: a silent exit looks like a run that did nothing."""
    print(
        f"{args.checkpoint} holds a finished run of {checkpoint['epoch']} epochs ({checkpoint['step']} steps): "
        "nothing to resume. Pass --fresh to start a new run in its place, or give a new --checkpoint.",
        flush=True,
    )


def train(args: argparse.Namespace) -> list[float]:
    checkpoint = load_checkpoint(args)
    if checkpoint and checkpoint["epoch"] >= args.epochs:
        say_finished(args, checkpoint)
        return checkpoint["losses"]
    version = checkpoint["version"] if checkpoint else args.version or ShardSet(args.remote).published()
    if version is None:
        raise SystemExit(f"{args.remote} has no published version yet: run `make demo` or the pipeline first")
    dataset = StreamingDataset(
        remote=args.remote,
        local=args.local,
        version=version,
        batch_size=args.batch_size,
        shuffle=True,
        shuffle_seed=args.seed,
    )
    loader = StreamingDataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
    net = model()
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    # epoch: the one in progress, from 0 (the loader's count); step: the steps done, so the next is step + 1
    epoch, step, losses, partial = 0, 0, [], (0.0, 0)
    if checkpoint:
        net.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])
        epoch, step, losses = checkpoint["epoch"], checkpoint["step"], checkpoint["losses"]
        partial = tuple(checkpoint["partial"])
        sample = checkpoint["loader"]["sample_in_epoch"]
        print(
            f"resuming {args.checkpoint} at step {step + 1} (epoch {epoch}, sample {sample}) on version {version}",
            flush=True,
        )
    else:
        print(
            f"starting a new run on version {version} of {args.remote} ({args.epochs} epochs); "
            f"checkpoint {args.checkpoint}",
            flush=True,
        )

    def checkpoint_now() -> int:
        """Save the run as it is now; the loader's ``sample_in_epoch``."""
        loader_state = loader.state_dict()
        state = {"version": version, "model": net.state_dict(), "optimizer": optimizer.state_dict()}
        run = {"epoch": epoch, "step": step, "losses": losses, "partial": partial}  # partial: this epoch's loss so far
        save(args.checkpoint, {**state, "loader": loader_state, **run})
        return int(loader_state["sample_in_epoch"])

    steps_here = 0  # this process's, for --stop-after-steps
    while epoch < args.epochs:
        for batch in loader:
            pixels, labels = batch_tensors(batch)
            loss = nn.functional.cross_entropy(net(pixels), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step, steps_here = step + 1, steps_here + 1
            partial = (partial[0] + loss.item() * len(labels), partial[1] + len(labels))
            if args.stop_after_steps and steps_here == args.stop_after_steps:
                sample = checkpoint_now()
                print(
                    f"stopping after step {step} (epoch {epoch}, sample {sample}) as --stop-after-steps asks; "
                    f"{args.checkpoint} holds the checkpoint",
                    flush=True,
                )
                return losses
        total, count = partial
        losses.append(total / max(count, 1))
        print(
            f"epoch {epoch} done at step {step}: loss {losses[-1]:.4f} over {count} samples of version {version}",
            flush=True,
        )
        epoch, partial = epoch + 1, (0.0, 0)
        checkpoint_now()
    return losses


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--remote", default=None, help="shard-set root: a folder or a URL (default: where `make demo` publishes)"
    )
    parser.add_argument("--local", default=None, help="local cache folder (default: beside the checkpoint)")
    parser.add_argument("--version", type=int, default=None, help="version to train on (default: the published one)")
    parser.add_argument("--checkpoint", type=Path, default=Path("data/train_digits.pt"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--stop-after-steps", type=int, default=0, help="checkpoint and exit after N steps")
    parser.add_argument(
        "--fresh", action="store_true", help="start a new run, replacing the checkpoint, instead of continuing it"
    )
    args = parser.parse_args(argv)
    args.remote = args.remote or default_remote()
    args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    args.local = args.local or str(args.checkpoint.parent / "train_digits_cache")
    return args


if __name__ == "__main__":
    train(parse())
