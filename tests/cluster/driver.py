"""The driver side of the cluster tests, run as its own process (``python -m tests.cluster.driver SPEC``).

Each scenario starts one Spark application on the standalone cluster of ``testsupport/spark_cluster.py``
from a fresh process, since a process holds one SparkContext and the suite's other tests keep a
``local[...]`` one. The last line printed is ``RESULT <json>``, which the tests assert on.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROWS = 4000


def _session(spec: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(spec["master"]).appName(f"mds-cluster-{spec['scenario']}")
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + 120  # both workers' executors, so that the tasks can spread over them
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    return spark


def _frame(spark: Any) -> Any:
    """ROWS rows in 8 partitions; ``where`` is the working directory of the task that computed the row,
    in the same stage as the write (no shuffle in between): the executor's directory on its worker."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    where = F.udf(lambda: os.getcwd(), T.StringType()).asNondeterministic()
    return spark.range(0, ROWS, 1, 8).select(
        F.col("id"),
        (F.col("id") % 10).cast("int").alias("label"),
        F.concat(F.lit("row "), F.col("id").cast("string")).alias("text"),
        F.array(*[(F.col("id") * 0.5 + i).cast("float") for i in range(4)]).alias("vec"),
        where().alias("where"),
    )


def _executor_mds_core(spark: Any) -> list[list[str]]:
    """[mds_core's file, SPARK_LOCAL_DIRS, cwd] as the executors' Python workers see them (this module runs
    as __main__, so its functions travel by value and need nothing of the project on the executors)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    found = F.udf(
        lambda: json.dumps([__import__("mds_core").__file__, os.environ.get("SPARK_LOCAL_DIRS", ""), os.getcwd()]),
        T.StringType(),
    ).asNondeterministic()
    return sorted(json.loads(text) for text in {row[0] for row in spark.range(0, 8, 1, 8).select(found()).collect()})


def _expected(row_id: int) -> dict[str, Any]:
    return {"id": row_id, "label": row_id % 10, "text": f"row {row_id}", "vec": [row_id * 0.5 + i for i in range(4)]}


def _read_back(local: Path) -> dict[str, Any]:
    """Every sample of the dataset at ``local`` compared with what the frame held."""
    from mds_core import LocalDataset

    samples = list(LocalDataset(str(local)))
    ids = [int(s["id"]) for s in samples]
    exact = all(
        int(s["id"]) == e["id"]
        and int(s["label"]) == e["label"]
        and s["text"] == e["text"]
        and [float(v) for v in s["vec"]] == e["vec"]
        and s["vec"].dtype.name == "float32"
        for s, e in zip(samples, (_expected(i) for i in ids))
    )
    return {
        "rows": len(samples),
        "ids_in_order": ids == list(range(ROWS)),
        "every_id_once": sorted(ids) == list(range(ROWS)),
        "exact": exact,
        "where": sorted({s["where"] for s in samples}),
    }


def convert(spec: dict[str, Any]) -> dict[str, Any]:
    """(a) to S3; a shared local out with num_tasks='auto'; (c) a driver-only local out."""
    from mds_core import dataframe_to_mds
    from mds_core.convert.cluster import default_parallelism
    from mds_core.errors import MDSError
    from mds_core.storage.remote import open_store

    begun = time.perf_counter()
    spark = _session(spec)
    report: dict[str, Any] = {
        "session_seconds": time.perf_counter() - begun,
        "default_parallelism": default_parallelism(spark),
    }
    report["executor_mds_core"] = _executor_mds_core(spark)
    frame = _frame(spark)

    # (a) eight partitions to loopback S3; executors get the endpoint and credentials from spark.executorEnv.*
    url = spec["s3_url"]
    started = time.perf_counter()
    result = dataframe_to_mds(frame, mds_kwargs={"out": url, "size_limit": "8kb"})
    report["s3_seconds"] = time.perf_counter() - started
    report["s3_rows_per_partition"] = result.stats.rows_per_partition
    store = open_store(url)
    keys = store.list()
    report["s3_staging_left"] = [k for k in keys if k.startswith("_staging")]
    local = Path(spec["scratch"]) / "s3-copy"
    for key in keys:
        store.download(key, str(local / key))
    report["s3"] = _read_back(local)

    # A shared local path (the same directory for driver and executors): the probe passes; num_tasks='auto'.
    shared = Path(spec["shared_out"])
    result = dataframe_to_mds(frame, mds_kwargs={"out": str(shared), "num_tasks": "auto"})
    report["shared_rows_per_partition"] = result.stats.rows_per_partition
    report["shared_dirs"] = sorted(p.name for p in shared.iterdir())
    report["shared"] = _read_back(shared)

    # (c) a path only the driver's disk has (the workers see a private tmpfs there).
    if spec["hidden_out"] is None:
        spark.stop()
        return report
    hidden = Path(spec["hidden_out"])
    started = time.perf_counter()
    try:
        dataframe_to_mds(frame, mds_kwargs={"out": str(hidden)})
        report["hidden_error"] = None
    except MDSError as err:
        report["hidden_error"] = {"type": type(err).__name__, "message": str(err)}
    report["hidden_seconds"] = time.perf_counter() - started
    report["hidden_exists_on_driver"] = hidden.exists()
    report["total_seconds"] = time.perf_counter() - begun
    spark.stop()
    return report


def pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """(b) the digits dataset's whole Dagster graph, resources and registry from the environment
    (MDS_SPARK_MASTER=spark://..., MDS_DATASETS)."""
    import warnings

    warnings.filterwarnings("ignore")
    from mds_core import StreamingDataset
    from pipelines.assets.smoke import SMOKE_CHECK
    from pipelines.registry import load_registry
    from pipelines.resources import default_resources
    from pipelines.runs import materialize_days

    # (d) first, in this process (the JVM and Dagster are loaded once): a master that cannot fit the
    # executor asked for. The failed session is stopped, so the run below gets a new one.
    no_room = resource(
        {
            "master": os.environ["MDS_SPARK_MASTER"],
            "timeout": spec["no_room_timeout"],
            "conf": {**json.loads(os.environ["MDS_SPARK_CONF"]), "spark.executor.memory": "4g"},
        }
    )
    [digits] = [dataset for dataset in load_registry() if dataset.name == "digits"]  # from $MDS_DATASETS
    resources = default_resources(os.environ)
    started = time.perf_counter()
    result = materialize_days(digits, ["2026-01-01", "2026-01-02"], resources, mode="overwrite")
    seconds = time.perf_counter() - started
    # Outside a run, the secrets (EnvVar settings such as MDS_SPARK_CONF) are resolved as a run resolves them.
    resources = {name: each.process_config_and_initialize() for name, each in resources.items()}
    [smoke] = [e for e in result.get_asset_check_evaluations() if e.check_name == SMOKE_CHECK]
    smoke_meta = {k: v.value for k, v in smoke.metadata.items()}
    shards = resources["shard_store"].shard_set("digits")
    files = shards.shards(1)
    url = resources["shard_store"].url("digits")
    dataset = StreamingDataset(remote=url, local=spec["cache"], version=1)
    ids = sorted(int(dataset[i]["id"]) for i in range(len(dataset)))
    session = resources["spark"].session()
    conf = {
        key: session.conf.get(key)
        for key in ("spark.master", "spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.driver.memory")
    }
    return {
        "no_room": no_room,
        "success": result.success,
        "seconds": seconds,
        "published": shards.published(),
        "smoke_passed": smoke.passed,
        "rows_streamed": smoke_meta.get("rows_streamed"),
        "exactly_once": smoke_meta.get("exactly_once"),
        "ids": ids == list(range(120)),
        "partition_dirs": sorted({f.raw_data.basename.split("/")[-2] for f in files}),
        "shard_names": [f.raw_data.basename for f in files][:3],
        "url": url,
        "conf": conf,
    }


def resource(spec: dict[str, Any]) -> dict[str, Any]:
    """(d) the pipelines' Spark resource against a master that is down, or that gives no executor."""
    from dagster import EnvVar

    from mds_core.errors import MDSError
    from pipelines.resources import SparkResource
    from testsupport.fault_proxy import apply_env, restore_env

    # The settings reach the resource as a deployment's do: $MDS_SPARK_CONF through its EnvVar-bound field
    # (run config may only tune). Put back afterwards: the pipeline scenario reads the original next.
    saved = apply_env({"MDS_SPARK_CONF": json.dumps(spec["conf"])})
    started = time.perf_counter()
    try:
        SparkResource(
            master=spec["master"], spark_config_json=EnvVar("MDS_SPARK_CONF"), master_timeout=spec["timeout"]
        ).session()
        error = None
    except MDSError as err:
        error = {"type": type(err).__name__, "message": str(err)}
    finally:
        restore_env(saved)
    from pyspark import SparkContext

    return {
        "error": error,
        "seconds": time.perf_counter() - started,
        "context_left": SparkContext._active_spark_context is not None,
    }


def torch_distributor(spec: dict[str, Any]) -> dict[str, Any]:
    """(e) TorchDistributor(local_mode=False): each run is a barrier job of one task per process, each task a
    torchrun node on an executor, running tests/clients/train_fn.py's function (sent by value: the
    executors have mds_core from pyFiles, not the tests)."""
    from pyspark import cloudpickle
    from pyspark.ml.torch.distributor import TorchDistributor

    import tests.clients.train_fn as train_fn

    cloudpickle.register_pickle_by_value(train_fn)
    spark = _session(spec)
    errors: dict[str, str | None] = {}
    for name, processes, stop_after, checkpoint in spec["runs"]:
        work = Path(spec["scratch"]) / name
        (work / "trace").mkdir(parents=True, exist_ok=True)
        distributor = TorchDistributor(num_processes=processes, local_mode=False, use_gpu=False)
        credentials = [spec["host"], spec["token"], spec["remote"]]
        paths = [str(work / "cache"), str(work / "trace"), str(Path(spec["scratch"]) / checkpoint)]
        try:
            distributor.run(train_fn.train, *credentials, *paths, stop_after, 8)
            errors[name] = None
        except Exception as err:  # the killed runs: what the distributor reports
            errors[name] = f"{type(err).__name__}: {str(err)[:300]}"
            (work / "error.txt").write_text(str(err))  # the whole of it, for a failure's diagnosis
    spark.stop()
    return {"errors": errors}


def main() -> None:
    spec = json.loads(sys.argv[1])
    try:
        report = {
            "convert": convert,
            "pipeline": pipeline,
            "resource": resource,
            "torch_distributor": torch_distributor,
        }[spec["scenario"]](spec)
    except Exception:
        report = {"crashed": traceback.format_exc()}
    print("RESULT " + json.dumps(report, default=str), flush=True)


if __name__ == "__main__":
    main()
