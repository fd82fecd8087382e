"""Operated daily for years, a shard set's per-day cost stays flat: day 366 costs what day 2 costs.

The per-day path (testsupport/daily_cost.py) is what the pipeline does each day: commit the new day
(an append), check the new version with the bounded loader check (``check_version``: the new shards
plus a bounded sample of the older ones), then publish it. It runs on the loopback S3 server, and
every request it makes, DataLoader workers' included, is counted at a proxy in front of the server.

The sample budget is one day's rows, so day 2 already reads a full sample (all of day 1): the
comparison is then about what a year of history costs, not about a sample still filling up.

``benchmarks/bench_daily_cost.py`` runs the same path after 365 and 1,000 days and reports it.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from testsupport.daily_cost import ROWS_PER_DAY, DayCost, daily_path, day_two, describe, seed_history

HISTORY_DAYS = 365
REPETITIONS = 5
TOLERANCE = 1.2


# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def year(s3_server) -> str:
    """A shard set on the S3 server with a year of daily versions."""
    return seed_history(s3_server, HISTORY_DAYS)


@pytest.mark.timing
def test_day_366_costs_what_day_2_costs(s3_server, fault_proxy, year: str, tmp_path: Path) -> None:
    day_two(s3_server, fault_proxy, str(tmp_path / "jobs-warm"))  # imports and first connections: not a day's cost
    early: list[DayCost] = []
    late: list[DayCost] = []
    for rep in range(REPETITIONS):  # interleaved, so a burst of load elsewhere hits both alike
        early.append(day_two(s3_server, fault_proxy, str(tmp_path / f"jobs-early-{rep}")))
        late.append(daily_path(year, fault_proxy, HISTORY_DAYS + rep, str(tmp_path / f"jobs-late-{rep}")))
    print(describe("day 2", early))
    print(describe(f"day {HISTORY_DAYS + 1}", late))
    assert [c.version for c in late] == [HISTORY_DAYS + 1 + rep for rep in range(REPETITIONS)]
    # the same reading work: the new day in full plus one earlier day as the sample
    for cost in early + late:
        assert cost.checked["new_rows"] == cost.checked["sampled_rows"] == ROWS_PER_DAY, cost.checked
    requests_ratio = statistics.median(c.requests for c in late) / statistics.median(c.requests for c in early)
    seconds_ratio = statistics.median(c.seconds for c in late) / statistics.median(c.seconds for c in early)
    print(f"day {HISTORY_DAYS + 1} / day 2: requests {requests_ratio:.2f}x, seconds {seconds_ratio:.2f}x")
    assert requests_ratio <= TOLERANCE, (describe("day 2", early), describe("late", late))
    assert seconds_ratio <= TOLERANCE, (describe("day 2", early), describe("late", late))
