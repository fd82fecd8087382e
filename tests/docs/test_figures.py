"""The figures the pages quote, read from the pages and compared with what the code computes, what a test
asserts, or what benchmarks/RESULTS.md records (a benchmark's figures live there; the pages quote them)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mds_core.errors import MDSError
from mds_core.format.shard import BLOCK_BYTES, shard_head
from tests.docs.blocks import page_text, section

RESULTS = page_text("benchmarks/RESULTS.md")


# ---------------------------------------------------------------------------------------------------------
# Benchmark figures: quoted from benchmarks/RESULTS.md


def test_the_readme_speed_table_quotes_the_benchmark_targets() -> None:
    speed = section(page_text("README.md"), "## Speed")
    # This round's figures, and the earlier round's for what this round did not measure again.
    targets = "".join(
        section(RESULTS, title)
        for title in (
            "## Benchmarks a reviewer can trust (issue 38, item 0)",
            "## Streaming from object storage (issue 28)",
            "## The targets (issue 15)",
        )
    )
    rows = [line for line in speed.splitlines() if line.startswith("| ") and "×" in line]
    assert len(rows) == 15, rows
    for row in rows:
        for figure in re.findall(r"\d+\.\d+×|\d+%", row.split("|", 2)[2]):
            assert figure in targets, f"README.md's Speed table quotes {figure}, not in RESULTS.md's targets: {row}"
    smoke = re.search(
        r"reads a 1M-row day at (\d+k) rows/s and takes less time than the\nconversion before it \((\d\.\d+×)", speed
    )
    assert smoke and f"**{smoke[1]}**" in targets and f"**{smoke[2]}**" in targets, smoke
    assert "(benchmarks/RESULTS.md#benchmarks-a-reviewer-can-trust-issue-38-item-0)" in speed


def test_the_readme_scale_figures_are_the_scale_benchmark() -> None:
    scale = section(RESULTS, "## At scale: one node of 8 ranks with 2 workers each (issue 38, item 1)")
    readme = section(page_text("README.md"), "## Speed")
    quoted = re.search(r"On one node of 8 ranks .*?\(\[at scale\]\(benchmarks/RESULTS\.md#([\w-]+)\)\)", readme, re.S)
    assert quoted and quoted[1] == "at-scale-one-node-of-8-ranks-with-2-workers-each-issue-38-item-1", quoted
    figures = re.findall(r"\d+\.\d+×|\d+\.\d+ s", quoted[0])
    assert len(figures) == 7, figures
    for figure in figures:
        assert figure in scale, f"README.md quotes {figure} for the scale run, not in RESULTS.md's section"
    on_s3 = re.search(r"The same node reading .*?\(\[on S3\]\(benchmarks/RESULTS\.md#([\w-]+)\)\)", readme, re.S)
    assert on_s3 and on_s3[1] == "the-same-node-on-the-loopback-s3", on_s3
    figures = re.findall(r"\d+\.\d+×", on_s3[0])
    s3_part = section(RESULTS, "### The same node on the loopback S3")
    first_batches = re.findall(r"^\| 10[⁶⁷] \([\d,]+\) \| \*\*(\d+\.\d+×)\*\*", s3_part, re.M)  # the table's column
    assert figures == first_batches, (figures, first_batches)


def test_the_planner_and_telemetry_figures_are_the_benchmarks() -> None:
    planning = section(RESULTS, "## Planning and telemetry (issue 18)")
    seconds = re.search(r"\*\*(\d+\.\d)–(\d+\.\d) s\*\* \(median of 3; peak RSS (\d\.\d+) GiB\)", planning)
    assert seconds, planning
    whole = f"{round(float(seconds[1]))} s"  # 16.0-16.8 s: "16 s"
    shares = re.search(r"\*\*(−?\d+\.\d%)\*\* wall .*?\*\*(−?\d+\.\d%)\*\* CPU", planning)
    assert shares, planning
    wall, cpu = shares.groups()
    readme = section(page_text("README.md"), "## Speed")
    assert f"8 workers in {whole};" in readme and f"({wall} wall, {cpu} CPU" in readme
    assert "(benchmarks/RESULTS.md#planning-and-telemetry-issue-18)" in readme
    speed = section(page_text("docs/planning.md"), "## Speed")
    assert f"takes {whole}\nfor one epoch, median of 3, with peak RSS {seconds[3]} GiB" in speed
    assert "benchmarks.md#planning-and-telemetry-issue-18" in speed
    bookkeeping = re.search(r"about (\d\.\d+) µs per block of 256 samples", planning)
    assert bookkeeping and float(bookkeeping[1]) < 0.6  # operations.md: "about half a microsecond per block"
    assert "about half a microsecond per decoded block" in page_text("docs/operations.md")


def test_the_daily_cost_requests_are_the_benchmarks() -> None:
    daily = section(RESULTS, "## Per-day cost of a daily shard set (flat per-day cost)")
    requests = set(re.findall(r"^\| [\d,]+ days \([\d,]+ shards\) \| (\d+) \| (\d+) \|", daily, re.MULTILINE))
    assert len(requests) == 1 and len(set(next(iter(requests)))) == 1, requests  # the same every day
    [(count, _)] = requests
    readme = section(page_text("README.md"), "## Every day, for years")
    assert f"({count} requests on S3 either way" in readme
    assert "(benchmarks/RESULTS.md#per-day-cost-of-a-daily-shard-set-flat-per-day-cost)" in readme


# ---------------------------------------------------------------------------------------------------------
# Figures a test asserts: the docs quote the test's constant


def test_the_kill_steps_are_the_crash_tests() -> None:
    from tests.crash.test_kill_points import KILL_STEPS
    from tests.spark.test_kill_points_convert import CONVERT_STEPS

    table = section(page_text("docs/remote-storage.md"), "### Crash consistency: a kill at every step")
    rows = re.findall(r"^\| ([^|]+?) \| ([\d +]+) \|$", table, re.MULTILINE)
    documented = [tuple(int(n) for n in steps.split(" + ")) for _, steps in rows]
    assert documented == [(n,) for n in KILL_STEPS.values()] + [CONVERT_STEPS], rows
    total = sum(KILL_STEPS.values()) + sum(CONVERT_STEPS)
    assert f"\n{total} kills in all" in table


def _quoted() -> dict[str, list[str]]:
    """Per page, the fragments that quote a figure of the code (or of a test), made from that figure."""
    from mds_core.order.partition import get_partitions
    from mds_core.order.traversal import traversal_order
    from mds_core.sizes import bytes_to_int
    from mds_core.storage.download_threads import DOWNLOAD_THREADS as ALL
    from mds_core.storage.download_threads import DOWNLOAD_THREADS_UNDER_LIMIT as UNDER
    from mds_core.storage.first_byte import FACTOR, FLOOR, MAX_LATE
    from mds_core.storage.throttle import THROTTLE_BUDGET
    from mds_core.versions.head import MAX_PROBES
    from mds_core.versions.manifest import HISTORY_LIMIT
    from mds_core.versions.numbering import CLOCK_SKEW
    from mds_core.writer.mds_writer import CHUNK_BYTES, ZSTD_CHUNK_BYTES
    from tests.versions.test_head import LATEST_REQUESTS

    sequence = ",".join(str(i) for i in traversal_order(get_partitions("orig", 10, 2, 1, 1, 1, 1)))
    return {
        "docs/ordering.md": [f"with `N=10`, `C=2` and no shuffle, the sequence is `{sequence}`"],
        "docs/format.md": [
            f'(`"64mb"` is stored as `{bytes_to_int("64mb")}`)',
            f"about {ZSTD_CHUNK_BYTES >> 10} KiB of samples for zstd and about {CHUNK_BYTES >> 20} MiB for gzip",
            f"reads {BLOCK_BYTES >> 20} MiB blocks",
        ],
        "docs/versions.md": [
            f"(the last {HISTORY_LIMIT})",
            f"more than {MAX_PROBES} versions behind",
            f"`CLOCK_SKEW` ({CLOCK_SKEW.total_seconds() / 3600:g} h)",
            f"`latest()` is {LATEST_REQUESTS} requests there",
        ],
        "docs/remote-storage.md": [
            f"(`{THROTTLE_BUDGET:g} s` in all",
            f"{ALL} transfers at once per remote stream ({UNDER} under",
            f"no answer after {FLOOR:g} s, or {FACTOR} times the",
            f"asked again at most {MAX_LATE} times",
        ],
        "docs/planning.md": [f"download threads ({ALL}, or {UNDER} under a cache limit"],
    }


def test_the_pages_quote_the_codes_figures() -> None:
    from mds_core.storage.download_threads import DOWNLOAD_THREADS, DOWNLOAD_THREADS_UNDER_LIMIT, download_threads

    assert (download_threads(None), download_threads(1 << 30)) == (DOWNLOAD_THREADS, DOWNLOAD_THREADS_UNDER_LIMIT)
    for page, fragments in _quoted().items():
        text = " ".join(page_text(page).split())
        assert not [f for f in fragments if f not in text], f"{page} should quote: {fragments}"


def test_a_shard_cannot_exceed_4_gib() -> None:
    """docs/format.md: offsets are u32; the last one is the file's size."""
    largest = (1 << 32) - 1 - 12  # the sample count and two offsets take 12 bytes
    assert np.frombuffer(shard_head([largest], b""), "<u4").tolist() == [1, 12, (1 << 32) - 1]
    with pytest.raises(MDSError, match="shard of 4294967296 bytes passes the 4 GiB limit of MDS offsets"):
        shard_head([largest + 1], b"")
