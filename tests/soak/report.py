"""The soak's verdicts and its report: exactly-once per epoch, flat resources, the cache under its limit.

``analyse`` turns what the run left behind (each rank's per-epoch ids and telemetry, the probe's
samples, the proxy's fault counts) into one JSON-ready dict with a ``checks`` section (each check
True or False); ``tests.soak.figures`` writes it out.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from tests.soak.probe import DiskSample, Sample

TELEMETRY = ("shards_downloaded", "bytes_downloaded", "cache_hits", "cache_misses", "evictions")


@dataclass(frozen=True)
class Flatness:
    """How much a sampled value may grow: the last third's mean may exceed the first third's by ``rel``
    of it plus ``abs``. Samples before every rank finished its first epoch (imports, forks, the first
    downloads) are warmup and left out."""

    rss_rel: float = 0.10
    rss_abs_kb: int = 24 << 10
    fds_abs: float = 4
    threads_abs: float = 4
    tmp_files_abs: float = 4


def epochs(out: Path, num_ranks: int, num_samples: int) -> dict[str, Any]:
    """Every epoch's ids over all ranks against the dataset (each id exactly once), plus telemetry sums."""
    by_epoch: dict[int, dict[int, dict]] = defaultdict(dict)
    for path in out.glob("rank*-epoch*.json"):
        record = json.loads(path.read_text())
        by_epoch[record["epoch"]][record["rank"]] = record
    expected = Counter(range(num_samples))
    bad, seconds, first_end = [], [], None
    telemetry: Counter[str] = Counter()
    for epoch in sorted(by_epoch):
        ranks = by_epoch[epoch]
        seen = Counter(i for record in ranks.values() for i in record["ids"])
        if len(ranks) != num_ranks or seen != expected:
            missing, extra = expected - seen, seen - expected
            bad.append({"epoch": epoch, "ranks": sorted(ranks), "missing": len(missing), "extra": len(extra)})
        seconds.append(max(record["seconds"] for record in ranks.values()))
        if first_end is None:
            first_end = max(record["finished"] for record in ranks.values())
        for record in ranks.values():
            telemetry.update({k: record["metrics"]["totals"][k] for k in TELEMETRY})
    return {
        "epochs": len(by_epoch),
        "bad_epochs": bad,
        "epoch_seconds": [round(s, 1) for s in seconds],
        "samples_read": sum(len(r["ids"]) for ranks in by_epoch.values() for r in ranks.values()),
        "first_epoch_end": first_end,
        "telemetry": dict(telemetry),
    }


def _thirds(values: Sequence[float]) -> tuple[float, float] | None:
    """Means of the first and last thirds of ``values``, or None if too few to judge."""
    if len(values) < 6:
        return None
    third = len(values) // 3
    return fmean(values[:third]), fmean(values[-third:])


def _flat(name: str, values: Sequence[float], rel: float, allowed: float) -> dict[str, Any]:
    thirds = _thirds(values)
    if thirds is None:
        return {"metric": name, "samples": len(values), "ok": True, "note": "too few samples to judge"}
    first, last = thirds
    limit = first * (1 + rel) + allowed
    return {
        "metric": name,
        "first": round(first, 1),
        "last": round(last, 1),
        "limit": round(limit, 1),
        "ok": last <= limit,
    }


def flatness(
    samples: list[Sample], disk: list[DiskSample], judged: set[str], tol: Flatness, warmup: float
) -> list[dict[str, Any]]:
    """Per judged process: RSS, fds and threads flat after ``warmup`` (probe seconds); and the temp files."""
    series: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.t >= warmup:
            series[(sample.role, sample.pid)].append(sample)
    rows = []
    for (role, pid), points in sorted(series.items()):
        if not any(role == j or role.startswith(j + "-") for j in judged):
            continue
        for name, values, rel, allowed in (
            ("rss_kb", [p.rss_kb for p in points], tol.rss_rel, tol.rss_abs_kb),
            ("fds", [p.fds for p in points], 0.0, tol.fds_abs),
            ("threads", [p.threads for p in points], 0.0, tol.threads_abs),
        ):
            rows.append({"role": role, "pid": pid, **_flat(name, values, rel, allowed)})
    # The last disk sample is taken after the readers exit; judge the run itself.
    tmp_files = [d.tmp_files for d in disk[:-1] if d.t >= warmup]
    rows.append({"role": "disk", "pid": 0, **_flat("tmp_files", tmp_files, 0.0, tol.tmp_files_abs)})
    return rows


def analyse(
    out: Path,
    params: dict[str, Any],
    samples: list[Sample],
    disk: list[DiskSample],
    faults: dict[str, Any],
    outcome: dict[str, Any],
    judged: set[str],
    tol: Flatness,
    probe_start: float,
) -> dict[str, Any]:
    """``probe_start``: the wall-clock time of the probe's t = 0, to place the epochs on its clock."""
    run = epochs(out, params["ranks"], params["samples"])
    warmup = (run["first_epoch_end"] or probe_start) - probe_start
    run["warmup_seconds"] = round(warmup, 1)
    run["download_amplification"] = round(
        run["telemetry"].get("bytes_downloaded", 0) / max(1, run["epochs"] * params["dataset_bytes"]), 2
    )
    flat = flatness(samples, disk, judged, tol, warmup)
    limit = params["cache_limit_bytes"]
    cache = {
        "limit": limit,
        "max_bytes": max((d.cache_bytes for d in disk), default=0),
        "max_bytes_with_staged": max((d.cache_bytes + d.staged_bytes for d in disk), default=0),
    }
    writer = outcome.get("writer", {})
    checks = {
        "readers_exited_cleanly": not outcome["reader_errors"],
        "no_writer_errors": writer.get("errors", 1) == 0 and writer.get("commits", 0) > 0,
        "epochs_exactly_once": run["epochs"] >= params["min_epochs"] and not run["bad_epochs"],
        "cache_within_limit": cache["max_bytes"] <= limit,
        "cache_limit_bit": run["telemetry"].get("evictions", 0) > 0,
        "faults_injected": sum(faults.get("injected", {}).values()) > 0,
        "resources_flat": all(row["ok"] for row in flat),
        "no_temp_files_left": bool(disk) and disk[-1].tmp_files == 0,
    }
    return {
        "params": params,
        "checks": checks,
        "passed": all(checks.values()),
        "run": run,
        "cache": cache,
        "faults": faults,
        "outcome": outcome,
        "flatness": flat,
    }
