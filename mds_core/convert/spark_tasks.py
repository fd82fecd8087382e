"""What runs on the Spark executors.

Each task attempt writes its partition's shards to its own staging directory (uploading as it goes when the output is
remote) and returns one small manifest row.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mds_core.convert.arrow import ShapeGuessMissed
from mds_core.convert.table import write_batch
from mds_core.convert.type_rules import ColumnPlan
from mds_core.format.index import dumps_index
from mds_core.writer.mds_writer import MDSWriter

MANIFEST_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("attempt", pa.int64()),
        ("staging", pa.string()),
        ("rows", pa.int64()),
        ("skipped", pa.int64()),
        ("seconds", pa.float64()),
        ("index", pa.string()),
        ("missed", pa.string()),
    ]
)
MANIFEST_DDL = (
    "partition int, attempt long, staging string, rows long, skipped long, seconds double, index string, missed string"
)


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs; pickled once into the task closure."""

    plans: list[ColumnPlan]
    columns: dict[str, str]
    writer_kwargs: dict[str, Any]
    staging: str  # a local directory or a URL; each attempt writes below it
    remote: bool  # staging is a URL: each attempt writes on the executor's disk and uploads
    null_policy: str
    fill_values: dict[str, Any] | None
    udf_iterable: Callable[..., Any] | None = None
    udf_kwargs: dict[str, Any] = field(default_factory=dict)


def convert_partition(spec: TaskSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: write this attempt's shards to staging, yield its manifest."""
    from pyspark import TaskContext

    started = time.perf_counter()
    context = TaskContext.get()
    if context is None:  # mapInArrow runs this in a task, where there always is one
        raise RuntimeError("convert_partition runs only inside a Spark task")
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
    yield pa.RecordBatch.from_pylist(
        [
            {
                "partition": partition,
                "attempt": attempt,
                "staging": name,
                "rows": rows,
                "skipped": skipped,
                "seconds": time.perf_counter() - started,
                "index": index,
                "missed": missed,
            }
        ],
        schema=MANIFEST_SCHEMA,
    )


def _write_partition(
    writer: MDSWriter, spec: TaskSpec, batches: Iterator[pa.RecordBatch], partition: int
) -> tuple[int, int]:
    rows = skipped = 0
    if spec.udf_iterable is not None:
        for batch in batches:
            for sample in spec.udf_iterable(batch.to_pandas(), **spec.udf_kwargs):
                writer.write(sample)
                rows += 1
        return rows, 0
    where = f" of partition {partition}"
    for batch in batches:
        written, dropped = write_batch(
            writer, batch, spec.plans, spec.null_policy, spec.fill_values, rows + skipped, where
        )
        rows, skipped = rows + written, skipped + dropped
    return rows, skipped


def _executor_scratch() -> str | None:
    # Spark hands Python workers its local directories (spark.local.dir), which executors clean up.
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    return local_dirs.split(",")[0] or None
