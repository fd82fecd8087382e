"""The soak's report files: ``report.json``, ``report.txt``, the sampled curves as CSV and ``curves.png``."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tests.soak.probe import DiskSample, Sample

_MIB = 1 << 20


def write_report(out: Path, report: dict[str, Any], samples: list[Sample], disk: list[DiskSample]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "report.txt").write_text(summary(report))
    _csv(out / "processes.csv", Sample, samples)
    _csv(out / "disk.csv", DiskSample, disk)
    plot(out / "curves.png", samples, disk, report["cache"]["limit"])


def _csv(path: Path, kind: type, rows: list[Any]) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([f.name for f in fields(kind)])
        writer.writerows([[round(v, 2) if isinstance(v, float) else v for v in asdict(row).values()] for row in rows])


def summary(report: dict[str, Any]) -> str:
    """The figures a person reads first, as plain text."""
    p, run, cache, faults, outcome = (report[k] for k in ("params", "run", "cache", "faults", "outcome"))
    t = run["telemetry"]
    lines = [
        f"soak: {'PASSED' if report['passed'] else 'FAILED'} in {outcome['seconds']:.0f} s",
        f"world: {p['ranks']} ranks x {p['workers']} workers, batch {p['batch_size']}, {p['samples']:,} samples "
        f"in {p['shards']} shards ({p['dataset_bytes']:,} bytes)",
        f"epochs: {run['epochs']} (seconds each: {run['epoch_seconds']}), samples read: {run['samples_read']:,}, "
        f"epochs not exactly once: {run['bad_epochs'] or 'none'}",
        f"downloads: {run['download_amplification']}x the dataset per epoch; warmup (first epoch): "
        f"{run['warmup_seconds']} s",
        f"faults: p={p['fault_rate']} per GET, {faults['matched']:,} GETs, injected {faults['injected']} "
        f"(failed attempts retried: {faults['retried']}), download_retry={p['download_retry']}",
        f"cache: max {cache['max_bytes']:,} bytes of complete shards (with staged downloads "
        f"{cache['max_bytes_with_staged']:,}) vs limit {cache['limit']:,}; telemetry: {t}",
        f"writer: {outcome.get('writer')}",
        f"reader errors: {outcome['reader_errors'] or 'none'}",
        "",
        "resources, first third vs last third (after warmup):",
    ]
    for row in report["flatness"]:
        if "first" in row:
            lines.append(
                f"  {'ok ' if row['ok'] else 'BAD'} {row['role']:<10} {row['metric']:<9} "
                f"{row['first']:>10} -> {row['last']:>10} (limit {row['limit']})"
            )
        else:
            lines.append(f"  ok  {row['role']:<10} {row['metric']:<9} {row['note']}")
    lines += ["", "checks:"] + [f"  {'ok ' if ok else 'BAD'} {name}" for name, ok in report["checks"].items()]
    return "\n".join(lines) + "\n"


def plot(path: Path, samples: list[Sample], disk: list[DiskSample], limit: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        series[sample.role].append(sample)
    fig, axes = plt.subplots(2, 3, figsize=(16, 8), constrained_layout=True)
    palette = plt.get_cmap("tab20")  # 20 colors; an int picks the i-th of them
    colors = [palette(i) for i in range(palette.N)]  # a dozen processes: the default cycle of 10 would repeat
    for (role, points), color in zip(sorted(series.items()), colors * 4):
        ts = [p.t for p in points]
        for ax, values in (
            (axes[0, 0], [p.rss_kb / 1024 for p in points]),
            (axes[0, 1], [p.fds for p in points]),
            (axes[0, 2], [p.threads for p in points]),
        ):
            ax.plot(ts, values, label=role, lw=0.8, color=color)
    ts = [d.t for d in disk]
    axes[1, 0].plot(ts, [d.cache_bytes / _MIB for d in disk], label="complete shards", lw=0.8)
    axes[1, 0].plot(ts, [(d.cache_bytes + d.staged_bytes) / _MIB for d in disk], label="with staged", lw=0.6)
    axes[1, 0].axhline(limit / _MIB, color="red", ls="--", label="cache_limit")
    axes[1, 1].plot(ts, [d.tmp_files for d in disk], lw=0.8)
    axes[1, 2].plot(ts, [d.job_files for d in disk], lw=0.8)
    titles = ["RSS (MiB)", "open fds", "threads", "cache (MiB)", "temp files (cache *.tmp + TMPDIR)"]
    titles += ["job directory files"]
    for ax, title in zip(axes.flat, titles):
        ax.set_title(title)
        ax.set_xlabel("seconds")
    axes[0, 0].legend(fontsize=6, ncol=2)
    axes[1, 0].legend(fontsize=7)
    fig.savefig(path, dpi=90)
    plt.close(fig)
