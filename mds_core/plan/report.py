"""The plan as text (a table per epoch, then the recommendations) and as a plot."""

from __future__ import annotations

from mds_core.errors import ConfigurationError
from mds_core.plan.figures import TrainingPlan
from mds_core.sizes import format_bytes

_MIB = 1 << 20  # the plot's unit


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render_text(plan: TrainingPlan) -> str:
    s = plan.settings
    title = (
        f"Plan for {s['world']}, batch {s['batch_size']} per rank, {s['epochs']} epoch(s) of "
        f"{s['samples_per_epoch']:,} samples; {s['shards']:,} shards, {format_bytes(s['dataset_bytes'])}"
    )
    order = (
        f"order: shuffle={s['shuffle']} {s['shuffle_algo']}, block {s['shuffle_block_size']:,}, "
        f"{s['num_canonical_nodes']} canonical node(s); predownload {s['predownload']}, cache_limit "
        f"{format_bytes(s['cache_limit']) if s['cache_limit'] else 'none'}"
    )
    lines = [title, order, ""]
    header = ("node", "shards", "downloaded", "fetched again", "peak cache", "first batch", "waiting")
    for epoch in plan.epochs:
        rows = [header] + [
            (
                str(n.node),
                f"{n.shards_downloaded:,}",
                format_bytes(n.bytes_downloaded),
                f"{n.refetched_shards:,}",
                format_bytes(n.peak_cache_bytes),
                _seconds(n.first_batch_seconds),
                _percent(n.data_wait_fraction),
            )
            for n in epoch.nodes
        ]
        rate = "-" if epoch.samples_per_second is None else f"{epoch.samples_per_second:,.0f} samples/s"
        lines.append(f"epoch {epoch.epoch}: {_seconds(epoch.seconds)} modelled, {rate}")
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
        lines.append("")
    lines.append(
        f"smallest cache_limit without repeated downloads: {format_bytes(plan.smallest_cache_limit)} per node "
        f"(shards in use at once: {format_bytes(plan.working_set_bytes)})"
    )
    lines.append("recommendations:")
    lines += [f"  {r.setting} = {r.value if r.value is not None else '-'}: {r.reason}" for r in plan.recommendations]
    lines.append(
        f"(planned in {plan.plan_seconds:.1f} s; downloads and cache are exact without a limit or at the "
        "recommended one; repeated downloads under a smaller limit, and all times, are modelled)"
    )
    return "\n".join(lines)


def save_plot(plan: TrainingPlan, path: str) -> None:
    """Cache footprint and cumulative downloads per node over the planned steps, as an image (PNG, SVG, ...)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigurationError("plotting needs matplotlib: pip install 'mds-pipelines[plan]'") from None
    curves = plan.curves
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    for node, (footprint, downloaded) in enumerate(zip(curves["footprint"], curves["downloaded"])):
        top.plot(curves["step"], [b / _MIB for b in footprint], label=f"node {node}")
        bottom.plot(curves["step"], [b / _MIB for b in downloaded], label=f"node {node}")
    if plan.settings["cache_limit"]:
        top.axhline(plan.settings["cache_limit"] / _MIB, linestyle="--", color="grey", label="cache_limit")
    total_steps = curves["step"][-1] + 1 if curves["step"] else 0
    steps_per_epoch = total_steps // plan.settings["epochs"]
    for epoch in range(1, plan.settings["epochs"]):
        for axis in (top, bottom):
            axis.axvline(epoch * steps_per_epoch, linestyle=":", color="grey")
    highest = max([plan.settings["cache_limit"] or 0] + [max(node, default=0) for node in curves["footprint"]])
    top.set_ylim(0, 1.1 * highest / _MIB or 1)  # room above the limit's line
    bottom.set_ylim(bottom=0)
    top.set_ylabel("cache (MiB)")
    bottom.set_ylabel("downloaded (MiB)")
    bottom.set_xlabel(f"training step ({plan.settings['epochs']} epoch(s))")
    top.set_title(f"{plan.settings['world']}, batch {plan.settings['batch_size']}")
    top.legend(fontsize="small", ncol=min(4, len(curves["footprint"]) + 1))
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
