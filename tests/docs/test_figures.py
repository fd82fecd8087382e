"""The figures the pages quote, read from the pages and compared with what the code computes, what a test
asserts, or what benchmarks/RESULTS.md records (a benchmark's figures live there; the pages quote them)."""

from __future__ import annotations

import re
import warnings

import numpy as np

from tests.docs.blocks import ROOT


def _text(page: str) -> str:
    return (ROOT / page).read_text()


def _section(text: str, heading: str) -> str:
    """From the line ``heading`` to the next heading of the same level or above."""
    start = text.index(f"\n{heading}\n")
    level = heading.split()[0]
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(level)}}} ", text) if m.start() > start]
    return text[start : ends[0] if ends else len(text)]


RESULTS = _text("benchmarks/RESULTS.md")


# ---------------------------------------------------------------------------------------------------------
# Benchmark figures: quoted from benchmarks/RESULTS.md


def test_the_readme_speed_table_quotes_the_benchmark_targets() -> None:
    speed = _section(_text("README.md"), "## Speed")
    # This round's figures, and the earlier round's for what this round did not measure again.
    targets = _section(RESULTS, "## Streaming from object storage (issue 28)") + _section(
        RESULTS, "## The targets (issue 15)"
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
    assert "(benchmarks/RESULTS.md#streaming-from-object-storage-issue-28)" in speed


def test_the_planner_and_telemetry_figures_are_the_benchmarks() -> None:
    planning = _section(RESULTS, "## Planning and telemetry (issue 18)")
    seconds = re.search(r"\*\*(\d+\.\d)–(\d+\.\d) s\*\* \(median of 3; peak RSS (\d\.\d+) GiB\)", planning)
    assert seconds, planning
    whole = f"{round(float(seconds[1]))} s"  # 16.0-16.8 s: "16 s"
    wall, cpu = re.search(r"\*\*(−?\d+\.\d%)\*\* wall .*?\*\*(−?\d+\.\d%)\*\* CPU", planning).groups()
    readme = _section(_text("README.md"), "## Speed")
    assert f"8 workers in {whole};" in readme and f"({wall} wall, {cpu} CPU" in readme
    assert "(benchmarks/RESULTS.md#planning-and-telemetry-issue-18)" in readme
    speed = _section(_text("docs/planning.md"), "## Speed")
    assert f"takes {whole}\nfor one epoch, median of 3, with peak RSS {seconds[3]} GiB" in speed
    assert "benchmarks.md#planning-and-telemetry-issue-18" in speed
    bookkeeping = re.search(r"about (\d\.\d+) µs per block of 256 samples", planning)
    assert bookkeeping and float(bookkeeping[1]) < 0.6  # operations.md: "about half a microsecond per block"
    assert "about half a microsecond per decoded block" in _text("docs/operations.md")


def test_the_daily_cost_requests_are_the_benchmarks() -> None:
    daily = _section(RESULTS, "## Per-day cost of a daily shard set (flat per-day cost)")
    requests = set(re.findall(r"^\| [\d,]+ days \([\d,]+ shards\) \| (\d+) \| (\d+) \|", daily, re.MULTILINE))
    assert len(requests) == 1 and len(set(next(iter(requests)))) == 1, requests  # the same every day
    [(count, _)] = requests
    readme = _section(_text("README.md"), "## Every day, for years")
    assert f"({count} requests on S3 either way" in readme
    assert "(benchmarks/RESULTS.md#per-day-cost-of-a-daily-shard-set-flat-per-day-cost)" in readme


# ---------------------------------------------------------------------------------------------------------
# Figures a test asserts: the docs quote the test's constant


def test_the_kill_steps_are_the_crash_tests() -> None:
    from tests.crash.test_kill_points import KILL_STEPS
    from tests.spark.test_kill_points_convert import CONVERT_STEPS

    table = _section(_text("docs/remote-storage.md"), "### Crash consistency: a kill at every step")
    rows = re.findall(r"^\| ([^|]+?) \| ([\d +]+) \|$", table, re.MULTILINE)
    documented = [tuple(int(n) for n in steps.split(" + ")) for _, steps in rows]
    assert documented == [(n,) for n in KILL_STEPS.values()] + [CONVERT_STEPS], rows
    total = sum(KILL_STEPS.values()) + sum(CONVERT_STEPS)
    assert f"\n{total} kills in all" in table


def test_latest_takes_the_requests_test_head_asserts() -> None:
    from tests.versions.test_head import LATEST_REQUESTS

    assert f"`latest()` is {LATEST_REQUESTS} requests there" in _text("docs/versions.md").replace("\n", " ")


# ---------------------------------------------------------------------------------------------------------
# Figures the code computes


def test_the_ordering_worked_example() -> None:
    """docs/ordering.md, Elasticity: the global batches of the worked example, on each world it names."""
    from mds_core.order.spec import OrderSpec
    from mds_core.order.traversal import traversal_order
    from mds_core.order.work import generate_work

    text = " ".join(_text("docs/ordering.md").split())
    example = re.search(
        r"Five shards hold ([\d, and]+) samples, with `C=(\d)`, `py1e`, `seed=(\d+)`, epoch 0, `S=(\d+)` and "
        r"`G=(\d)`\. The global batches are (.*?)\. They are the same for `\(P,R,W,B\)` = (.*?)\.",
        text,
    )
    assert example, "the worked example's sentence changed"
    shards = [int(n) for n in re.findall(r"\d+", example[1])]
    canonical, seed, block, global_batch = (int(example[i]) for i in range(2, 6))
    batches = [sorted(int(n) for n in group.split(",")) for group in re.findall(r"\{([\d,]+)\}", example[6])]
    worlds = [tuple(int(n) for n in w.split(",")) for w in re.findall(r"`\((\d,\d,\d,\d)\)`", example[7])]
    assert len(worlds) == 4 and len(batches) == sum(shards) // global_batch
    for nodes, ranks, workers, batch in worlds:
        assert nodes * ranks * batch == global_batch
        spec = OrderSpec(
            [shards],
            shuffle=True,
            shuffle_seed=seed,
            num_canonical_nodes=canonical,
            shuffle_block_size=block,
            batch_size=batch,
        )
        with warnings.catch_warnings():  # py1e warns that the block is narrower than some shards
            warnings.simplefilter("ignore")
            order = [int(i) for i in traversal_order(generate_work(spec, nodes, ranks, workers, 0, 0)) if i >= 0]
        got = [sorted(order[i : i + global_batch]) for i in range(0, len(order), global_batch)]
        assert got == batches, (nodes, ranks, workers, batch)


def test_the_ordering_figures() -> None:
    from mds_core.order.partition import get_partitions
    from mds_core.order.spec import OrderSpec
    from mds_core.order.traversal import traversal_order

    text = " ".join(_text("docs/ordering.md").split())
    assert "with `N=10`, `C=2` and no shuffle, the sequence is `0,5,1,6,2,7,3,8,4,9`" in text
    assert traversal_order(get_partitions("orig", 10, 2, 1, 1, 1, 1)).tolist() == [0, 5, 1, 6, 2, 7, 3, 8, 4, 9]
    defaults = re.search(r"4,000,000 for `C=1`, 2,000,000 for `C=2`, and 262,144 from `C=16` on", text)
    assert defaults
    for canonical, expected in ((1, 4_000_000), (2, 2_000_000), (16, 262_144), (64, 262_144)):
        assert OrderSpec([[10]], num_canonical_nodes=canonical).block_size(1) == expected
    assert "becomes `64·P` for `py1s` and `py2s`" in text
    for algo, expected in (("py1s", 128), ("py2s", 128), ("py1e", 2), ("py1br", 2), ("naive", 2)):
        assert OrderSpec([[10]], shuffle_algo=algo).canonical_nodes(2) == expected


def test_the_format_figures() -> None:
    from mds_core.format.shard import BLOCK_BYTES
    from mds_core.sizes import bytes_to_int
    from mds_core.writer.mds_writer import CHUNK_BYTES, ZSTD_CHUNK_BYTES

    text = " ".join(_text("docs/format.md").split())
    assert '(`"64mb"` is stored as `67108864`)' in text and bytes_to_int("64mb") == 67108864
    assert "chunks of about 112 KiB of samples for zstd and about 4 MiB for gzip and bz2" in text
    assert (ZSTD_CHUNK_BYTES, CHUNK_BYTES) == (112 << 10, 4 << 20)
    assert "in-order reading reads 1 MiB blocks" in text and BLOCK_BYTES == 1 << 20
    assert np.dtype("<u4").itemsize == 4  # offsets are u32: "a shard cannot exceed 4 GiB"


def test_the_versions_figures() -> None:
    from mds_core.versions.head import MAX_PROBES
    from mds_core.versions.manifest import HISTORY_LIMIT
    from mds_core.versions.numbering import CLOCK_SKEW

    text = " ".join(_text("docs/versions.md").split())
    assert f"being the versions published before, oldest first (the last {HISTORY_LIMIT})" in text
    assert f"or one more than {MAX_PROBES} versions behind, `latest()` lists `_versions/` once" in text
    assert CLOCK_SKEW.total_seconds() == 3600 and "more than an hour (`CLOCK_SKEW`)" in text


def test_the_throttling_budget_the_storage_page_quotes() -> None:
    from mds_core.storage import remote

    assert f"(`{remote._THROTTLE_BUDGET:g} s` in all when" in _text("docs/remote-storage.md")
