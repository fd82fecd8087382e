"""What the client matrix converts, built the same way on any session: the client's own (in its
environment) and the tests' classic one, so the two can be compared exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ROWS = 600
FRAME_SQL = (
    "id",
    "CAST(id % 7 AS INT) AS label",
    "concat('row-', id) AS name",
    "CAST(id AS DOUBLE) / 4 AS quarter",
    "id % 2 = 0 AS even",
    "date_add(DATE'2026-01-01', CAST(id % 30 AS INT)) AS day",
    "CAST(concat('b', id) AS BINARY) AS payload",
)


def bad_calls(spark: Any, data: Any, written: str) -> dict[str, Callable[[], Any]]:
    """Calls that must fail, each with the error a classic session gives; ``written`` already holds a dataset."""
    from mds_core import dataframe_to_mds

    scratch = f"{written}-bad"
    return {
        "not a dataframe": lambda: dataframe_to_mds(data.collect(), mds_kwargs={"out": scratch}),
        "no out": lambda: dataframe_to_mds(data, mds_kwargs={}),
        "existing out": lambda: dataframe_to_mds(data, mds_kwargs={"out": written}),
        "null": lambda: dataframe_to_mds(
            data.selectExpr("id", "CASE WHEN id = 5 THEN NULL ELSE name END AS name"), mds_kwargs={"out": scratch}
        ),
        "no encoding": lambda: dataframe_to_mds(
            spark.range(2).selectExpr("INTERVAL '1' DAY AS gap"), mds_kwargs={"out": scratch}
        ),
        "wrong encoding": lambda: dataframe_to_mds(
            data.select("id", "name"), mds_kwargs={"out": scratch, "columns": {"id": "int64", "name": "int"}}
        ),
    }
