"""The daily partitions every asset shares, and the backfill policy that makes a range one run."""

from __future__ import annotations

from datetime import date

from dagster import BackfillPolicy, DailyPartitionsDefinition

START_DATE = "2026-01-01"
DAILY = DailyPartitionsDefinition(start_date=START_DATE)

# A backfill of many days runs as one run, so it reads the range once and commits one version.
ONE_RUN = BackfillPolicy.single_run()

GROUP = "mds"


def day_index(day: str) -> int:
    """Days since the first partition: numbers the embedded dataset's daily slices."""
    return (date.fromisoformat(day) - date.fromisoformat(START_DATE)).days
