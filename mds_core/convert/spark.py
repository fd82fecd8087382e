"""``dataframe_to_mds``: write a Spark DataFrame as MDS shards from the executors.

The reference's signature, defaults and return value, with its known problems fixed:

* exact types (``mds_core.convert.type_rules``), encoded from Arrow record batches (``mapInArrow``), never
  row by row through pandas;
* every task attempt writes to its own staging directory ``<out>/_staging/<run>/<partition>.<attempt>``;
  the driver commits the winning attempt of each partition to ``<out>/<partition:05>``, removes the
  rest, and publishes ``index.json`` last, so retried or speculative attempts leave no orphans
  (``mds_core.convert.staging``);
* with a remote ``out`` each shard uploads as soon as it is complete and is deleted locally;
* the driver collects one small manifest per partition, never data.

pyspark is imported only when a function here is called (the ``spark`` extra).
"""

from __future__ import annotations

import functools
import re
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable

from mds_core import errors
from mds_core.convert.spark_schema import detect_shapes, spark_to_arrow
from mds_core.convert.spark_tasks import MANIFEST_DDL, TaskSpec, convert_partition
from mds_core.convert.staging import Target, open_target
from mds_core.convert.table import ConversionStats
from mds_core.convert.type_rules import ColumnPlan, check_null_policy, plan_columns
from mds_core.errors import ConversionError, MissingDependencyError

# Writer arguments the converter decides itself (out, columns) or handles on the driver.
_DRIVER_KWARGS = {"out", "columns", "keep_local", "exist_ok", "progress_bar"}


class ConversionResult(tuple):
    """``(local, remote)`` as the reference returns, carrying ``.stats`` (a ``ConversionStats``)."""

    stats: ConversionStats

    def __new__(cls, local: str, remote: str, stats: ConversionStats) -> "ConversionResult":
        result = super().__new__(cls, (local, remote))
        result.stats = stats
        return result


def dataframe_to_mds(
    dataframe: Any,
    merge_index: bool = True,
    mds_kwargs: dict[str, Any] | None = None,
    udf_iterable: Callable[..., Any] | None = None,
    udf_kwargs: dict[str, Any] | None = None,
    *,
    null_policy: str = "error",
    fill_values: dict[str, Any] | None = None,
) -> ConversionResult:
    """Write ``dataframe`` as MDS shards under ``mds_kwargs["out"]``; one sub-directory per partition.

    Args:
        dataframe: a ``pyspark.sql.DataFrame``.
        merge_index: also write ``<out>/index.json`` over every partition (published last).
        mds_kwargs: ``MDSWriter`` arguments; ``out`` is required (a local path, a URL such as
            ``s3://bucket/prefix``, or ``(local, remote)``); ``compression`` defaults to ``"zstd"``;
            ``columns`` (name -> encoding) selects and types the columns, else every column is
            written with the encoding of its type (docs/spark.md, "Type mapping").
        udf_iterable: ``f(pandas_df, **udf_kwargs)`` returning sample dicts, as in the reference
            (needs ``columns``; this path is row by row).
        null_policy: ``"error"`` (name the column and first bad row), ``"skip"`` (count them) or ``"fill"``.
        fill_values: column -> replacement value for ``"fill"``.

    Returns:
        ``(local, remote)`` like the reference (remote is ``""`` for a local ``out``), with ``.stats``:
        rows, skipped rows, raw and compressed bytes, shards, seconds, rows/s, rows per partition.
    """
    _import_pyspark()
    started = time.perf_counter()
    check_null_policy(null_policy, fill_values)
    kwargs = _check_arguments(dataframe, mds_kwargs, udf_iterable)
    plans = _plans(dataframe, kwargs.get("columns"), udf_iterable is None)
    # Only after every check passed: with exist_ok this removes what was there.
    target = open_target(kwargs["out"], bool(kwargs.get("exist_ok", False)))
    if udf_iterable is None:
        dataframe = dataframe.select(*[f"`{plan.name}`" for plan in plans])
    spec = TaskSpec(
        plans=plans, columns={p.name: p.encoding for p in plans} if udf_iterable is None else kwargs["columns"],
        writer_kwargs=_writer_kwargs(kwargs, target.remote), staging=target.staging_location(uuid.uuid4().hex[:16]),
        remote=target.remote, null_policy=null_policy, fill_values=fill_values,
        udf_iterable=udf_iterable, udf_kwargs=udf_kwargs or {},
    )
    spec, manifests = _run_until_shapes_hold(dataframe, spec, target, kwargs.get("progress_bar"))
    stats = target.commit(manifests, spec.staging, merge_index)
    stats.seconds = time.perf_counter() - started
    return ConversionResult(target.local_result(kwargs.get("keep_local", False)), target.location.remote or "", stats)


def _import_pyspark() -> Any:
    try:
        import pyspark
    except ImportError as err:
        raise MissingDependencyError(
            "dataframe_to_mds needs pyspark: pip install 'mds-pipelines[spark]'"
        ) from err
    return pyspark


def _check_arguments(dataframe: Any, mds_kwargs: dict[str, Any] | None, udf_iterable: Any) -> dict[str, Any]:
    from pyspark.sql import DataFrame

    if dataframe is None or not isinstance(dataframe, DataFrame):
        raise ConversionError(f"dataframe must be a pyspark.sql.DataFrame, got {type(dataframe).__name__}")
    kwargs = dict(mds_kwargs or {})  # the reference mutates the caller's dict; we copy it
    if "out" not in kwargs:
        raise ConversionError("mds_kwargs must contain 'out': a local path, a URL or (local, remote)")
    kwargs.setdefault("compression", "zstd")
    if udf_iterable is not None and "columns" not in kwargs:
        raise ConversionError("with udf_iterable, mds_kwargs must give 'columns' (name -> encoding)")
    return kwargs


def _writer_kwargs(kwargs: dict[str, Any], remote: str | None) -> dict[str, Any]:
    writer_kwargs = {k: v for k, v in kwargs.items() if k not in _DRIVER_KWARGS}
    if remote:
        writer_kwargs.setdefault("max_workers", 1)  # one upload in flight: about two shards on local disk
    return writer_kwargs


# ---- planning (driver) ----------------------------------------------------------------------------


def _plans(dataframe: Any, columns: dict[str, str] | None, check: bool) -> list[ColumnPlan]:
    schema, vectors, type_names = spark_to_arrow(dataframe.schema)
    if not check:  # with a udf the written columns come from the udf, not the schema
        if dataframe.isEmpty():
            raise ConversionError("dataframe is empty; there is nothing to convert")
        return []
    plans = plan_columns(schema, columns, vectors=vectors, type_names=type_names)
    return detect_shapes(dataframe, plans, columns)


# ---- running and committing (driver) --------------------------------------------------------------


def _run_tasks(dataframe: Any, spec: TaskSpec, target: Target, progress: bool | None) -> list[dict[str, Any]]:
    context = dataframe.sparkSession.sparkContext
    group = f"mds-{uuid.uuid4().hex[:12]}"
    previous = context.getLocalProperty("spark.jobGroup.id")
    context.setJobGroup(group, f"dataframe_to_mds -> {target.url}")
    watcher = _ProgressWatcher(context, group, dataframe.rdd.getNumPartitions(), progress, target.url)
    finished = False
    try:
        rows = dataframe.mapInArrow(functools.partial(convert_partition, spec), MANIFEST_DDL).collect()
        finished = True
    except Exception as err:
        target.discard(spec.staging)
        raise _executor_error(err) from err
    finally:
        watcher.stop(finished)
        context.setLocalProperty("spark.jobGroup.id", previous)
    return [row.asDict() for row in rows]


def _run_until_shapes_hold(dataframe: Any, spec: TaskSpec, target: Target,
                           progress: bool | None) -> tuple[TaskSpec, list[dict[str, Any]]]:
    """Run the tasks; when a guessed fixed shape did not hold, run again with those columns dynamic."""
    while True:
        manifests = _run_tasks(dataframe, spec, target, progress)
        missed = {m["missed"] for m in manifests if m["missed"]}
        if not missed:
            return spec, manifests
        target.discard(spec.staging)
        plans = [_dynamic(p) if p.name in missed else p for p in spec.plans]
        spec = replace(spec, plans=plans, columns={p.name: p.encoding for p in plans},
                       staging=target.staging_location(uuid.uuid4().hex[:16]))


def _dynamic(plan: ColumnPlan) -> ColumnPlan:
    return replace(plan, encoding=f"ndarray:{plan.dtype}", shape=None, guessed=False)


def _executor_error(err: Exception) -> Exception:
    """Our own error class and message when a task raised one of ours, else the Spark error."""
    found = re.findall(r"mds_core\.errors\.(\w+): (.+)", str(err))
    if not found:
        return err
    name, message = found[-1]
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.MDSError):
        return cls(message.strip())
    return err


class _ProgressWatcher:
    """A tqdm bar of finished partitions, fed by Spark's status tracker while ``collect`` blocks."""

    def __init__(self, context: Any, group: str, total: int, enabled: bool | None, url: str) -> None:
        self._stop = threading.Event()
        self._thread = None
        if enabled is False:
            return
        from tqdm import tqdm

        self._bar = tqdm(total=total, desc=f"partitions -> {url}", unit="partition",
                         disable=None if enabled is None else False, delay=0 if enabled else 2.0)
        self._thread = threading.Thread(target=self._poll, args=(context.statusTracker(), group), daemon=True)
        self._thread.start()

    def _poll(self, tracker: Any, group: str) -> None:
        while not self._stop.wait(0.5):
            done = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                if info and info.stageIds:  # the job's last stage is the one that writes
                    stage_info = tracker.getStageInfo(max(info.stageIds))
                    done += stage_info.numCompletedTasks if stage_info else 0
            self._bar.update(max(0, min(done, self._bar.total) - self._bar.n))

    def stop(self, finished: bool = False) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if finished:  # every partition is done once collect returns
                self._bar.update(self._bar.total - self._bar.n)
            self._bar.close()
