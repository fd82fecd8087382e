"""``dataframe_to_mds``: write a Spark DataFrame as MDS shards from the executors.

The reference's signature, defaults and return value, with its known problems fixed:

* exact types (``mds_core.convert.type_rules``), encoded from Arrow record batches (``mapInArrow``), never
  row by row through pandas;
* every task attempt writes to its own staging directory ``<out>/_staging/<run>/<partition>.<attempt>``;
  the driver commits the winning attempt of each partition to ``<out>/<partition:05>``, removes the
  rest, and publishes ``index.json`` last, so retried or speculative attempts leave no orphans
  (``mds_core.convert.staging``);
* with a remote ``out`` each shard uploads as soon as it is complete and is deleted locally;
* the driver collects one small manifest per partition, never data;
* classic and Spark Connect sessions alike: no ``sparkContext``, RDD or JVM call on a Connect session
  (``mds_core.convert.spark_connect``; job tags instead of job groups, progress from the server).

pyspark is imported only when a function here is called (the ``spark`` extra).
"""

from __future__ import annotations

import functools
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mds_core import errors
from mds_core.convert import cluster
from mds_core.convert.route import route_for
from mds_core.convert.spark_connect import check_reachable, is_connect, is_spark_dataframe
from mds_core.convert.spark_schema import detect_shapes, spark_to_arrow
from mds_core.convert.spark_tasks import MANIFEST_DDL, TaskSpec, convert_partition
from mds_core.convert.staging import Target, open_target
from mds_core.convert.table import ConversionStats
from mds_core.convert.type_rules import ColumnPlan, check_null_policy, plan_columns
from mds_core.errors import ConversionError, MissingDependencyError

# Writer arguments the converter decides itself (out, columns) or handles on the driver.
_DRIVER_KWARGS = {"out", "columns", "keep_local", "exist_ok", "progress_bar"}


class ConversionResult(tuple[str, str]):
    """``(local, remote)`` as the reference returns, carrying ``.stats`` (a ``ConversionStats``)."""

    stats: ConversionStats

    def __new__(cls, local: str, remote: str, stats: ConversionStats) -> ConversionResult:
        """A ``(local, remote)`` tuple that also carries ``stats``."""
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
        udf_kwargs: keyword arguments for ``udf_iterable``.
        null_policy: ``"error"`` (name the column and first bad row), ``"skip"`` (count them) or ``"fill"``.
        fill_values: column -> replacement value for ``"fill"``.

    Returns:
        ``(local, remote)`` like the reference (remote is ``""`` for a local ``out``), with ``.stats``:
        rows, skipped rows, raw and compressed bytes, shards, seconds, rows/s, rows per partition.
    """
    _import_pyspark()
    started = time.perf_counter()
    check_null_policy(null_policy, fill_values)
    kwargs, connect = _check_arguments(dataframe, mds_kwargs, udf_iterable)
    plans = _plans(dataframe, kwargs.get("columns"), udf_iterable is None, connect)
    route = route_for(kwargs["out"], connect=connect)  # decided once; the steps below take it as it is
    dataframe, kwargs = cluster.prepare(dataframe, kwargs, route)  # num_tasks; a local out every executor sees
    # Only after every check passed: with exist_ok this removes what was there.
    target = open_target(route, bool(kwargs.get("exist_ok", False)))
    if udf_iterable is None:
        dataframe = dataframe.select(*[f"`{plan.name}`" for plan in plans])
    spec = TaskSpec(
        plans=plans,
        columns={p.name: p.encoding for p in plans} if udf_iterable is None else kwargs["columns"],
        writer_kwargs=_writer_kwargs(kwargs, route.remote),
        staging=target.staging_location(uuid.uuid4().hex[:16]),
        remote=route.remote,
        null_policy=null_policy,
        fill_values=fill_values,
        udf_iterable=udf_iterable,
        udf_kwargs=udf_kwargs or {},
    )
    spec, manifests = _run_until_shapes_hold(dataframe, spec, target, kwargs.get("progress_bar"))
    stats = target.commit(manifests, spec.staging, merge_index)
    stats.seconds = time.perf_counter() - started
    return ConversionResult(target.local_result(kwargs.get("keep_local", False)), route.location.remote or "", stats)


def _import_pyspark() -> Any:
    try:
        import pyspark
    except ImportError as err:
        raise MissingDependencyError("dataframe_to_mds needs pyspark: pip install 'mds-pipelines[spark]'") from err
    return pyspark


def _check_arguments(
    dataframe: Any, mds_kwargs: dict[str, Any] | None, udf_iterable: Any
) -> tuple[dict[str, Any], bool]:
    """The writer arguments (a copy, with defaults), and whether ``dataframe`` is a Spark Connect one.

    The one place the converter asks (the steps after it take the answer, ``Route.connect``).
    """
    if not is_spark_dataframe(dataframe):
        kind = type(dataframe)
        raise ConversionError(
            f"dataframe must be a pyspark.sql.DataFrame (classic or Spark Connect), "
            f"got {kind.__module__}.{kind.__qualname__}"
        )
    connect = is_connect(dataframe)
    if connect:  # a dead server would make the first call below retry for minutes
        check_reachable(dataframe.sparkSession)
    kwargs = dict(mds_kwargs or {})  # the reference mutates the caller's dict; we copy it
    if "out" not in kwargs:
        raise ConversionError("mds_kwargs must contain 'out': a local path, a URL or (local, remote)")
    kwargs.setdefault("compression", "zstd")
    if udf_iterable is not None and "columns" not in kwargs:
        raise ConversionError("with udf_iterable, mds_kwargs must give 'columns' (name -> encoding)")
    return kwargs, connect


def _writer_kwargs(kwargs: dict[str, Any], remote: bool) -> dict[str, Any]:
    writer_kwargs = {k: v for k, v in kwargs.items() if k not in _DRIVER_KWARGS}
    if remote:
        writer_kwargs.setdefault("max_workers", 1)  # one upload in flight: about two shards on local disk
    return writer_kwargs


# ---- planning (driver) ----------------------------------------------------------------------------


def _plans(dataframe: Any, columns: dict[str, str] | None, check: bool, connect: bool) -> list[ColumnPlan]:
    schema, vectors, type_names = spark_to_arrow(dataframe.schema)
    if not check:  # with a udf the written columns come from the udf, not the schema
        if dataframe.isEmpty():
            raise ConversionError("dataframe is empty; there is nothing to convert")
        return []
    plans = plan_columns(schema, columns, vectors=vectors, type_names=type_names)
    return detect_shapes(dataframe, plans, columns, connect=connect)


# ---- running and committing (driver) --------------------------------------------------------------


def _run_tasks(dataframe: Any, spec: TaskSpec, target: Target, progress: bool | None) -> list[dict[str, Any]]:
    """Run the conversion job and collect the manifests, on a classic or a Spark Connect session.

    Classic: the job runs in its own job group, which the status tracker reports on (the progress bar)
    and which is cancelled if the driver stops waiting. Connect has no SparkContext: the job carries a
    tag instead (``interruptTag`` stops it) and the progress comes from the server's progress messages.
    """
    job = (
        _ConnectJob(dataframe, progress, target.url)
        if target.route.connect
        else _ClassicJob(dataframe, progress, target.url)
    )
    finished = False
    try:
        with job:
            rows = dataframe.mapInArrow(functools.partial(convert_partition, spec), MANIFEST_DDL).collect()
        finished = True
    except Exception as err:
        target.discard(spec.staging)
        raise _executor_error(err) from err
    finally:
        job.close(len(rows) if finished else None)
    return [row.asDict() for row in rows]


def _run_until_shapes_hold(
    dataframe: Any, spec: TaskSpec, target: Target, progress: bool | None
) -> tuple[TaskSpec, list[dict[str, Any]]]:
    """Run the tasks; when a guessed fixed shape did not hold, run again with those columns dynamic."""
    while True:
        manifests = _run_tasks(dataframe, spec, target, progress)
        missed = {m["missed"] for m in manifests if m["missed"]}
        if not missed:
            return spec, manifests
        target.discard(spec.staging)
        plans = [_dynamic(p) if p.name in missed else p for p in spec.plans]
        spec = replace(
            spec,
            plans=plans,
            columns={p.name: p.encoding for p in plans},
            staging=target.staging_location(uuid.uuid4().hex[:16]),
        )


def _dynamic(plan: ColumnPlan) -> ColumnPlan:
    return replace(plan, encoding=f"ndarray:{plan.dtype}", shape=None, guessed=False)


def _executor_error(err: Exception) -> Exception:
    """Our own error class and message when a task raised one of ours, else the Spark error.

    Classic sessions raise Py4J or ``PythonException`` errors, Spark Connect ones
    ``pyspark.errors.exceptions.connect.*``; each carries the task's Python traceback in its message,
    whose last ``mds_core.errors.<Class>: <message>`` line names our error.
    """
    found = re.findall(r"mds_core\.errors\.(\w+): (.+)", str(err))
    if not found:
        return err
    name, message = found[-1]
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.MDSError):
        return cls(message.strip())
    return err


class _ClassicJob:
    """A classic session's job: its own job group, and a tqdm bar fed by the status tracker."""

    def __init__(self, dataframe: Any, progress: bool | None, url: str) -> None:
        self._context = dataframe.sparkSession.sparkContext
        self._group, self._url = f"mds-{uuid.uuid4().hex[:12]}", url
        self._previous = self._context.getLocalProperty("spark.jobGroup.id")
        self._bar = None if progress is False else _bar(progress, url, dataframe.rdd.getNumPartitions())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _ClassicJob:
        self._context.setJobGroup(self._group, f"dataframe_to_mds -> {self._url}", interruptOnCancel=True)
        if self._bar is not None:
            args = (self._context.statusTracker(), self._bar)
            self._thread = threading.Thread(target=self._poll, args=args, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is not None and not issubclass(kind, Exception):  # KeyboardInterrupt...: stop the tasks
            self._context.cancelJobGroup(self._group)
        self._context.setLocalProperty("spark.jobGroup.id", self._previous)

    def _poll(self, tracker: Any, bar: Any) -> None:
        while not self._stop.wait(0.5):
            done = 0
            for job in tracker.getJobIdsForGroup(self._group):
                info = tracker.getJobInfo(job)
                if info and info.stageIds:  # the job's last stage is the one that writes
                    stage_info = tracker.getStageInfo(max(info.stageIds))
                    done += stage_info.numCompletedTasks if stage_info else 0
            bar.update(max(0, min(done, bar.total) - bar.n))

    def close(self, partitions: int | None) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        _close_bar(self._bar, partitions)


class _ConnectJob:
    """A Spark Connect job: tagged so it can be interrupted, progress from the server's messages.

    The number of partitions is not known before the job runs (there is no ``rdd`` to ask); the bar
    takes it from the last stage the server reports, and from the manifests once the job is done.
    """

    def __init__(self, dataframe: Any, progress: bool | None, url: str) -> None:
        self._session = dataframe.sparkSession
        self._tag = f"mds-{uuid.uuid4().hex[:12]}"
        self._bar = _bar(progress, url, None)
        self._thread = threading.get_ident()

    def __enter__(self) -> _ConnectJob:
        self._session.addTag(self._tag)
        if self._bar is not None:
            self._session.registerProgressHandler(self._progress)
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        try:
            if kind is not None and not issubclass(kind, Exception):  # KeyboardInterrupt...: stop the tasks
                self._session.interruptTag(self._tag)
        finally:
            self._session.removeTag(self._tag)
            if self._bar is not None:
                self._session.removeProgressHandler(self._progress)

    def _progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool, **_: Any) -> None:
        # Handlers are per client: another thread's queries call it too.
        if threading.get_ident() != self._thread or not stages:
            return
        last = max(stages, key=lambda stage: stage.stage_id)  # the stage that writes
        if self._bar.total != last.num_tasks:
            self._bar.total = last.num_tasks
            self._bar.refresh()
        self._bar.update(max(0, last.num_completed_tasks - self._bar.n))

    def close(self, partitions: int | None) -> None:
        _close_bar(self._bar, partitions)


def _bar(enabled: bool | None, url: str, total: int | None) -> Any:
    """A tqdm bar of finished partitions: on a terminal after two seconds, always with True, never with False."""
    if enabled is False:
        return None
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=f"partitions -> {url}",
        unit="partition",
        disable=None if enabled is None else False,
        delay=0 if enabled else 2.0,
    )


def _close_bar(bar: Any, partitions: int | None) -> None:
    if bar is None:
        return
    if partitions is not None:  # every partition is done once collect returns: one manifest each
        bar.total = partitions
        bar.update(partitions - bar.n)
    bar.close()
