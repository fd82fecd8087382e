"""``mds which``: the samples of global batch k, or the steps that saw sample x, from the indexes and the order."""

from __future__ import annotations

import json
from typing import Any

import click

from mds_core.cli.common import fail, say, show
from mds_core.cli.schedules import load_schedule, loader_order_options, schedule_option, scheduled_work, stream_names
from mds_core.order.spec import OrderSpec
from mds_core.order.world import parse_world
from mds_core.plan.which import EpochOrder, Source, key_values, resumed, shard_sizes


@click.command("which")
@click.argument("sources", nargs=-1, required=True)
@click.option("--world", default="1x1x1", show_default=True, help="NODESxRANKS_PER_NODE[xWORKERS_PER_RANK].")
@click.option("--batch-size", type=int, required=True, help="Per-device batch size (the DataLoader's).")
@click.option("--step", type=int, default=None, help="Which samples are in this global batch (from the resume point).")
@click.option("--sample", type=int, default=None, help="Which steps of the epoch read this global sample id.")
@click.option("--epoch", type=int, default=0, show_default=True)
@click.option("--resume-at", type=int, default=0, show_default=True, help="Global samples consumed in the epoch.")
@click.option(
    "--state",
    "state_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A state dict saved as JSON: its epoch, resume point, order settings and versions.",
)
@click.option("--version", "versions", type=int, multiple=True, help="Each SOURCE's shard-set version, in order.")
@loader_order_options
@schedule_option
@click.option("--key", default=None, help="Also show this column's values: reads only the shards of those samples.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def which_command(
    sources: tuple[str, ...],
    world: str,
    batch_size: int,
    step: int | None,
    sample: int | None,
    epoch: int,
    resume_at: int,
    state_file: str | None,
    versions: tuple[int, ...],
    schedule: str | None,
    key: str | None,
    as_json: bool,
    **settings: Any,
) -> None:
    """Which samples are in global batch --step, or which steps read --sample, for the data at SOURCES.

    SOURCES are folders or URLs holding index.json, or shard-set roots with --version; one stream
    each. Only their indexes are read, never a shard (except with --key, which reads just the shards
    of the samples shown). The order is StreamingDataset's with the same options and world.
    """
    if (step is None) == (sample is None):
        fail("give one of --step (which samples are in that global batch) or --sample (which steps read it)")
    if batch_size < 1:
        fail(f"--batch-size must be a positive integer (the per-device batch size), got {batch_size}")
    state = _load_state(state_file) if state_file else None
    picked = _sources(sources, versions, state)
    spec = OrderSpec(shard_sizes=shard_sizes(picked), **settings)
    if state is not None:
        spec, epoch, resume_at = resumed(spec, state), state["epoch"], state["sample_in_epoch"]
    work_of = scheduled_work(load_schedule(schedule), stream_names(sources), spec) if schedule else None
    order = EpochOrder(spec, parse_world(world), batch_size, max(epoch, 0), resume_at, work_of)
    answer = _batch_answer(order, step) if step is not None else _sample_answer(order, sample or 0)
    if key is not None:
        ids = answer["samples"] if step is not None else [answer["sample"]]
        answer["keys"] = dict(zip(map(str, ids), key_values(picked, ids, key)))
    if as_json:
        click.echo(json.dumps(answer, indent=2, default=_plain))
    else:
        say(_text(answer, key))


def _load_state(path: str) -> dict[str, Any]:
    """A state dict from a JSON file, with the keys ``which`` needs."""
    with open(path, encoding="utf-8") as handle:
        try:
            state = json.load(handle)
        except json.JSONDecodeError as err:
            fail(f"--state {path}: not JSON ({err})")
    needed = ["epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"]
    missing = [name for name in needed if not isinstance(state, dict) or not isinstance(state.get(name), int)]
    if missing:
        fail(f"--state {path}: not a state dict: it lacks the int(s) {missing}")
    return dict(state)


def _sources(sources: tuple[str, ...], versions: tuple[int, ...], state: dict[str, Any] | None) -> list[Source]:
    """Each SOURCE with its version: --version's, else the state's ``versions``, else none."""
    pinned: list[int | None] = list(versions) or list((state or {}).get("versions") or [None] * len(sources))
    if len(pinned) != len(sources):
        fail(f"{len(pinned)} version(s) for {len(sources)} source(s): give one --version per SOURCE, in order")
    return [Source(location, version) for location, version in zip(sources, pinned)]


def _batch_answer(order: EpochOrder, step: int) -> dict[str, Any]:
    ranks = order.batch_by_rank(step)
    return {**_where(order), "step": step, "samples": [i for rank in ranks for i in rank], "ranks": ranks}


def _sample_answer(order: EpochOrder, sample: int) -> dict[str, Any]:
    seen = [vars(found) for found in order.steps_of(sample)]
    return {**_where(order), "sample": sample, "seen": seen}


def _where(order: EpochOrder) -> dict[str, Any]:
    world = order.world
    return {
        "epoch": order.epoch,
        "resume_at": order.sample_in_epoch,
        "world": f"{world.num_nodes}x{world.ranks_per_node}x{world.workers_per_rank}",
        "batch_size": order.batch_size,
        "steps": order.steps,
    }


def _text(answer: dict[str, Any], key: str | None) -> str:
    head = f"epoch {answer['epoch']} from sample {answer['resume_at']}, world {answer['world']}, "
    head += f"batch size {answer['batch_size']}: {answer['steps']} steps"
    keys = answer.get("keys", {})
    if "step" in answer:
        lines = [f"{head}; step {answer['step']}:"]
        for rank, ids in enumerate(answer["ranks"]):
            shown = [f"{i} ({key}={show(keys[str(i)])})" if keys else str(i) for i in ids]
            lines.append(f"  rank {rank}: {' '.join(shown)}")
        return "\n".join(lines)
    sample = f"sample {answer['sample']}" + (f" ({key}={show(keys[str(answer['sample'])])})" if keys else "")
    if not answer["seen"]:
        return f"{head}; {sample} is read by no step (not drawn this epoch, or before the resume point)"
    lines = [f"{head}; {sample} is read at:"]
    lines += [f"  step {s['step']}: rank {s['rank']}, worker {s['worker']}, slot {s['slot']}" for s in answer["seen"]]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """A key value as JSON holds it: numbers as numbers (numpy's too), anything else as text."""
    return value.item() if hasattr(value, "item") else str(value)
