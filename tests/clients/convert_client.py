"""``dataframe_to_mds`` through a Databricks Connect client, run in that client's environment
(``.cache/clients/<name>``, built by tests/clients/setup_envs.sh) as its users call it.

    <client python> -m tests.clients.convert_client <sc:// url> <local out> <dbfs:/Volumes/... out>

Prints one JSON line: the client's versions, each conversion's result, and the error (type and message)
of each bad call, which tests/spark/test_databricks_connect_clients.py compares with a classic session's.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def session(url: str) -> Any:
    """The session a Databricks Connect user builds, pointed at the tests' server instead of a workspace."""
    from databricks.connect import DatabricksSession

    return DatabricksSession.builder.remote(url).getOrCreate()


def error_of(call: Any) -> list[str] | None:
    try:
        call()
    except Exception as err:  # what a user meets: its type and message, compared with classic
        return [f"{type(err).__module__}.{type(err).__qualname__}", str(err)]
    return None


def main() -> None:
    import pyspark

    from mds_core import dataframe_to_mds
    from tests.clients.frames import FRAME_SQL, ROWS, bad_calls, pipelines_step

    url, local_out, volume_out = sys.argv[1:4]
    spark = session(url)
    data = spark.range(0, ROWS, 1, 3).selectExpr(*FRAME_SQL)  # as the classic session builds it
    results = {}
    for name, out in (("local", local_out), ("volume", volume_out)):
        result = dataframe_to_mds(data, mds_kwargs={"out": out, "size_limit": 4096})
        results[name] = {"rows": result.stats.rows, "shards": result.stats.shards}
    pipelines = pipelines_step(data, f"{volume_out}-set")
    errors = {name: error_of(call) for name, call in bad_calls(spark, data, local_out).items()}
    kind = type(data)
    print(
        json.dumps(
            {
                "python": ".".join(map(str, sys.version_info[:2])),
                "pyspark": pyspark.__version__,
                "dataframe": f"{kind.__module__}.{kind.__qualname__}",
                "results": results,
                "pipelines": pipelines,
                "errors": errors,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
