"""The plan as text (a table per epoch, then the recommendations) and as a plot."""

from __future__ import annotations

from typing import Any

from mds_core.errors import ConfigurationError
from mds_core.plan.figures import TrainingPlan
from mds_core.sizes import format_bytes

_MIB = 1 << 20  # the plot's unit


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _duration(seconds: float) -> str:
    """``"1.25 s"``, ``"20.0 ms"``, ``"3.1 µs"``: a measured or given time, in the unit that reads best."""
    if seconds >= 1 or seconds == 0:
        return f"{seconds:,.2f} s"
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


def _rate(bandwidth: float) -> str:
    return f"{format_bytes(int(bandwidth))}/s"


TIMING_HINT = (
    "Pass --probe to measure this machine's link to the store, or --bandwidth and --latency; "
    "add --consume-time, your model's training seconds per sample."
)


def timing_lines(settings: dict[str, Any], hint: str = TIMING_HINT) -> list[str]:
    """What the probe measured, what the time model knows, and, in words, what it does not."""
    env, probe = settings["environment"], settings.get("probe")
    lines = []
    if probe is not None:
        bandwidth = _rate(probe["bandwidth"]) if probe["bandwidth"] else "not measured (the download took no time)"
        lines.append(
            f"probe, from this machine: startup {_duration(probe['startup_seconds'])} (a new storage client's first "
            f"read, paid when the dataset reads its index; not in the model), latency {_duration(probe['latency'])}, "
            f"bandwidth {bandwidth}, decode {_duration(probe['decode_seconds'])} per sample"
        )
    if env["bandwidth"] is None and env["consume_seconds"] is None:
        lines.append(
            "first batch and waiting: unknown without timing (the link's speed and the training step). "
            f"{hint} Known now: the bytes each node downloads before its first batch (the last column)."
        )
        return lines

    def source(name: str) -> str:
        return "measured" if probe is not None and probe.get(name) == env[name] else "given"

    given_latency = env["latency"] or source("latency") == "measured"
    known = [f"latency {_duration(env['latency'])} ({source('latency')})" if given_latency else "no request latency"]
    if env["bandwidth"] is not None:
        known.insert(0, f"link {_rate(env['bandwidth'])} per node ({source('bandwidth')})")
    if env["decode_seconds"]:
        known.append(f"decode {_duration(env['decode_seconds'])} per sample ({source('decode_seconds')})")
    if env["consume_seconds"] is not None:
        known.append(f"training {_duration(env['consume_seconds'])} per sample (given)")
    lines.append("timing: " + ", ".join(known))
    if env["bandwidth"] is None:
        lines.append(
            "  link speed unknown (--bandwidth or --probe): downloads take only the latency in the model, "
            "so waiting is a lower bound"
        )
    if env["consume_seconds"] is None:
        lines.append(
            "  training time per sample unknown (--consume-time): steps run as fast as the data comes, "
            "so waiting is that of a data-bound run, an upper bound"
        )
    return lines


def render_text(plan: TrainingPlan, hint: str = TIMING_HINT) -> str:
    """The plan as tables; ``hint`` says how to give the time model what it lacks (the CLI's options by default)."""
    s = plan.settings
    title = (
        f"Plan for {s['world']}, batch {s['batch_size']} per rank, {s['epochs']} epoch(s) of "
        f"{s['samples_per_epoch']:,} samples; {s['shards']:,} shards, {format_bytes(s['dataset_bytes'])}"
    )
    shuffle = (
        f"shuffle=True {s['shuffle_algo']}, block {s['shuffle_block_size']:,}" if s["shuffle"] else "shuffle=False"
    )
    phases = (s.get("schedule") or {}).get("phases")
    mixed = f"a schedule of {len(phases)} phase(s)" if phases else f"{s['num_canonical_nodes']} canonical node(s)"
    order = (
        f"order: {shuffle}, {mixed}; predownload {s['predownload']}, "
        f"cache_limit {format_bytes(s['cache_limit']) if s['cache_limit'] else 'none'}"
    )
    lines = [title, order, *timing_lines(s, hint), ""]
    for epoch in plan.epochs:
        timed = epoch.seconds is not None
        header: tuple[str, ...] = ("node", "shards", "downloaded", "fetched again", "peak cache")
        header += ("first batch", "waiting") if timed else ("before first batch",)
        rows = [header] + [
            (
                str(n.node),
                f"{n.shards_downloaded:,}",
                format_bytes(n.bytes_downloaded),
                f"{n.refetched_shards:,}",
                format_bytes(n.peak_cache_bytes),
                *(
                    (_seconds(n.first_batch_seconds), _percent(n.data_wait_fraction))
                    if timed
                    else (format_bytes(n.first_batch_bytes),)
                ),
            )
            for n in epoch.nodes
        ]
        if timed:
            rate = "-" if epoch.samples_per_second is None else f"{epoch.samples_per_second:,.0f} samples/s"
            lines.append(f"epoch {epoch.epoch}: {_seconds(epoch.seconds)} modelled, {rate}")
        else:
            lines.append(f"epoch {epoch.epoch}: time not modelled")
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
        lines.append("")
    lines.append(
        f"smallest cache_limit without repeated downloads: {format_bytes(plan.smallest_cache_limit)} per node "
        f"(shards in use at once: {format_bytes(plan.working_set_bytes)})"
    )
    lines.append("recommendations:")
    lines += [
        f"  {r.setting} = {r.value}: {r.reason}" if r.value is not None else f"  {r.setting}: {r.reason}"
        for r in plan.recommendations
    ]
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
