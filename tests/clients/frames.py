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


DAYS = ("2026-01-01", "2026-01-02")


def pipelines_step(data: Any, root: str) -> dict[str, Any]:
    """The pipelines' conversion step (``pipelines.cluster.write_day``, which the ``shards`` assets run)
    for two days, committed as one version of the shard set at ``root``."""
    from mds_core.versions import ShardSet
    from pipelines.cluster import write_day

    frame = data.selectExpr("id", "label", "name", "CAST(day AS STRING) AS day")
    with ShardSet(root).transaction(mode="overwrite", publish=False) as tx:
        rows = [write_day(frame, day, 2, {"out": tx.partition_out(day)}).stats.rows for day in DAYS]
    assert tx.version is not None
    return {"version": tx.version.number, "rows": tx.version.rows, "per_day": rows}
