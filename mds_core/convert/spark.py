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

import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import pyarrow as pa

from mds_core import errors
from mds_core.convert.table import ConversionStats, write_batch
from mds_core.convert.arrow import ShapeGuessMissed
from mds_core.convert.type_rules import ColumnPlan, check_null_policy, plan_columns, with_shape
from mds_core.errors import ConversionError, MissingDependencyError
from mds_core.format.index import dumps_index
from mds_core.convert.staging import Target, open_target
from mds_core.writer.mds_writer import MDSWriter

# Writer arguments the converter decides itself (out, columns) or handles on the driver.
_DRIVER_KWARGS = {"out", "columns", "keep_local", "exist_ok", "progress_bar"}
MANIFEST_SCHEMA = pa.schema([
    ("partition", pa.int32()), ("attempt", pa.int64()), ("staging", pa.string()), ("rows", pa.int64()),
    ("skipped", pa.int64()), ("seconds", pa.float64()), ("index", pa.string()), ("missed", pa.string()),
])
_MANIFEST_DDL = ("partition int, attempt long, staging string, rows long, skipped long, seconds double, "
                 "index string, missed string")


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
            written with the encoding of its type (README, "Type mapping").
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
    return _detect_shapes(dataframe, plans, columns)


def spark_to_arrow(schema: Any) -> tuple[pa.Schema, frozenset[str], dict[str, str]]:
    """The Arrow form of a Spark schema (as ``mapInArrow`` delivers it), ML vector columns, type names."""
    fields, vectors = [], set()
    for spark_field in schema.fields:
        if _is_vector(spark_field.dataType):
            vectors.add(spark_field.name)
        fields.append(pa.field(spark_field.name, _arrow_type(spark_field.dataType)))
    names = {f.name: f.dataType.simpleString() for f in schema.fields}
    return pa.schema(fields), frozenset(vectors), names


def _is_vector(dtype: Any) -> bool:
    from pyspark.sql.types import UserDefinedType

    return isinstance(dtype, UserDefinedType) and type(dtype).__name__ == "VectorUDT"


def _arrow_type(dtype: Any) -> pa.DataType:
    from pyspark.sql import types as T

    simple = {
        T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
        T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
        T.BinaryType: pa.binary(), T.BooleanType: pa.bool_(), T.DateType: pa.date32(),
        T.TimestampType: pa.timestamp("us", "UTC"), T.TimestampNTZType: pa.timestamp("us"),
        T.NullType: pa.null(),
    }
    for spark_type, arrow_type in simple.items():
        if isinstance(dtype, spark_type):
            return arrow_type
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, T.ArrayType):
        return pa.list_(_arrow_type(dtype.elementType))
    if isinstance(dtype, T.MapType):
        return pa.map_(_arrow_type(dtype.keyType), _arrow_type(dtype.valueType))
    if isinstance(dtype, T.StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType)) for f in dtype.fields])
    if isinstance(dtype, T.UserDefinedType):
        return _arrow_type(dtype.sqlType())
    return pa.month_day_nano_interval()  # intervals, variants...: rejected by the type rules


def _detect_shapes(dataframe: Any, plans: list[ColumnPlan], columns: dict[str, str] | None) -> list[ColumnPlan]:
    """Guess the fixed shape of inferred ndarray columns from the first row (one cheap ``first()``).

    Tasks verify every row against the guess and report a miss instead of failing; the driver then
    runs again with the dynamic-shape form (``_run_until_shapes_hold``). A full extra pass over the
    data to check the shapes first would cost as much as reading it.
    """
    from pyspark.sql import functions as F

    # A declared encoding is used as given; only inferred ones get the fixed-shape form.
    todo = [p for p in plans if p.kind == "ndarray" and p.shape is None and columns is None]
    exprs = [F.lit(1).alias("present")]
    for i, plan in enumerate(todo):
        for level, (low, high) in enumerate(_level_sizes(F, F.col(f"`{plan.name}`"), plan.ndim)):
            exprs += [low.alias(f"lo_{i}_{level}"), high.alias(f"hi_{i}_{level}")]
    first = dataframe.select(*exprs).first()
    if first is None:
        raise ConversionError("dataframe is empty; there is nothing to convert")
    row = first.asDict()
    guessed = {}
    for i, plan in enumerate(todo):
        bounds = [(row[f"lo_{i}_{lv}"], row[f"hi_{i}_{lv}"]) for lv in range(plan.ndim)]
        if all(lo is not None and lo == hi and lo > 0 for lo, hi in bounds):
            guessed[plan.name] = tuple(int(lo) for lo, _ in bounds)
    return [with_shape(p, guessed[p.name], guessed=True) if p.name in guessed else p for p in plans]


def _level_sizes(F: Any, column: Any, ndim: int) -> list[tuple[Any, Any]]:
    """Per nesting level: expressions for the smallest and largest list length in a row."""
    size = F.when(column.isNotNull(), F.size(column))
    levels = [(size, size)]
    flat = column
    for _ in range(1, ndim):
        inner = F.transform(flat, lambda x: F.size(x))
        levels.append((F.array_min(inner), F.array_max(inner)))
        flat = F.flatten(flat)
    return levels


# ---- tasks (executors) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs; pickled once into the task closure."""

    plans: list[ColumnPlan]
    columns: dict[str, str]
    writer_kwargs: dict[str, Any]
    staging: str  # a local directory or a URL; each attempt writes below it
    remote: str | None
    null_policy: str
    fill_values: dict[str, Any] | None
    udf_iterable: Callable[..., Any] | None = None
    udf_kwargs: dict[str, Any] = field(default_factory=dict)


def convert_partition(spec: TaskSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: write this attempt's shards to staging, yield its manifest."""
    from pyspark import TaskContext

    started = time.perf_counter()
    context = TaskContext.get()
    partition, attempt = context.partitionId(), context.taskAttemptId()
    name = f"{partition:05}.{attempt}"
    scratch = None
    if spec.remote:
        scratch = tempfile.mkdtemp(prefix=f"mds-{name}-", dir=_executor_scratch())
        out: Any = (scratch, f"{spec.staging}/{name}")
    else:
        out = os.path.join(spec.staging, name)
    rows = skipped = 0
    index, missed = "", None
    try:
        writer = MDSWriter(out=out, columns=spec.columns, keep_local=False, **spec.writer_kwargs)
        with writer:
            rows, skipped = _write_partition(writer, spec, batches, partition)
        index = dumps_index(writer.shards)
    except ShapeGuessMissed as miss:
        missed = miss.column  # the writer removed its files; the driver runs again without the guess
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    yield pa.RecordBatch.from_pylist([{
        "partition": partition, "attempt": attempt, "staging": name, "rows": rows, "skipped": skipped,
        "seconds": time.perf_counter() - started, "index": index, "missed": missed,
    }], schema=MANIFEST_SCHEMA)


def _write_partition(writer: MDSWriter, spec: TaskSpec, batches: Iterator[pa.RecordBatch],
                     partition: int) -> tuple[int, int]:
    rows = skipped = 0
    if spec.udf_iterable is not None:
        for batch in batches:
            for sample in spec.udf_iterable(batch.to_pandas(), **spec.udf_kwargs):
                writer.write(sample)
                rows += 1
        return rows, 0
    where = f" of partition {partition}"
    for batch in batches:
        written, dropped = write_batch(writer, batch, spec.plans, spec.null_policy, spec.fill_values,
                                       rows + skipped, where)
        rows, skipped = rows + written, skipped + dropped
    return rows, skipped


def _executor_scratch() -> str | None:
    # Spark hands Python workers its local directories (spark.local.dir), which executors clean up.
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    return local_dirs.split(",")[0] or None


# ---- running and committing (driver) --------------------------------------------------------------


def _run_tasks(dataframe: Any, spec: TaskSpec, target: Target, progress: bool | None) -> list[dict[str, Any]]:
    import functools

    context = dataframe.sparkSession.sparkContext
    group = f"mds-{uuid.uuid4().hex[:12]}"
    previous = context.getLocalProperty("spark.jobGroup.id")
    context.setJobGroup(group, f"dataframe_to_mds -> {target.url}")
    watcher = _ProgressWatcher(context, group, dataframe.rdd.getNumPartitions(), progress, target.url)
    finished = False
    try:
        rows = dataframe.mapInArrow(functools.partial(convert_partition, spec), _MANIFEST_DDL).collect()
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
