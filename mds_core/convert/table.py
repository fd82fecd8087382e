"""Tables to MDS without Spark.

``table_to_mds`` converts a pyarrow Table, a pandas DataFrame or an iterable of dicts with the same type rules and null
policy as ``mds_core.convert.spark.dataframe_to_mds``.

Values are encoded a record batch at a time (``mds_core.convert.arrow``) and handed to an
``MDSWriter`` as finished sample bytes, so the writer's shard layout, compression, hashing and
atomic publication apply unchanged.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from mds_core.convert.arrow import ShapeGuessMissed, encode_batch, list_layout, plain
from mds_core.convert.nulls import resolve_nulls
from mds_core.convert.type_rules import ColumnPlan, check_null_policy, plan_columns, with_shape
from mds_core.errors import ConversionError
from mds_core.format.index import ShardInfo
from mds_core.writer.mds_writer import MDSWriter

BATCH_ROWS = 8192


@dataclass
class ConversionStats:
    """What a conversion did: rows written and skipped, bytes, shards, time, rows per partition."""

    rows: int = 0
    skipped_rows: int = 0
    raw_bytes: int = 0
    compressed_bytes: int = 0
    shards: int = 0
    seconds: float = 0.0
    rows_per_partition: list[int] = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        """Rows converted per second of wall time (0 for an instant run)."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a dict, rows per second included."""
        return {**asdict(self), "rows_per_second": self.rows_per_second}

    def add_shards(self, shards: list[ShardInfo]) -> None:
        """Count ``shards`` and their raw and compressed bytes in."""
        self.shards += len(shards)
        self.raw_bytes += sum(s.raw_data.bytes for s in shards)
        self.compressed_bytes += sum((s.zip_data or s.raw_data).bytes for s in shards)


def table_to_mds(
    data: Any,
    out: str | os.PathLike[str] | tuple[str, str],
    columns: dict[str, str] | None = None,
    *,
    compression: str | None = "zstd",
    null_policy: str = "error",
    fill_values: dict[str, Any] | None = None,
    schema: pa.Schema | None = None,
    progress_bar: bool | None = None,
    **writer_kwargs: Any,
) -> ConversionStats:
    """Write ``data`` as one MDS dataset at ``out`` and return what was written.

    Args:
        data: a ``pyarrow.Table``/``RecordBatch``/``RecordBatchReader``, a pandas ``DataFrame``, or an
            iterable of dicts (read in batches of 8192; ``schema`` fixes their Arrow types, else the first batch's).
        out: a local directory, a URL, or ``(local, remote)``, as ``MDSWriter`` takes it.
        columns: column -> encoding to write only those columns with those encodings (validated);
            by default every column with the encoding of its type (docs/spark.md, "Type mapping").
        compression: as for ``MDSWriter``, but zstd by default, like ``dataframe_to_mds``.
        null_policy: ``"error"`` (name the column and row), ``"skip"`` (drop and count) or ``"fill"``.
        fill_values: column -> value used by ``"fill"`` instead of the type's default (0, "", False...).
        schema: the Arrow schema of an iterable of dicts; None takes the first batch's types.
        progress_bar: show rows written; ``None`` shows it on a terminal for conversions over a second.
        **writer_kwargs: further ``MDSWriter`` arguments (``hashes``, ``size_limit``, ``exist_ok``...).
    """
    check_null_policy(null_policy, fill_values)
    started = time.perf_counter()
    batches, arrow_schema, whole = _as_batches(data, schema)
    plans = plan_columns(arrow_schema, columns)
    if whole is not None:
        plans = [
            detect_fixed_shape(plan, whole.column(plan.name)) if _undeclared_array(plan, columns) else plan
            for plan in plans
        ]
    writer = MDSWriter(out=out, columns={p.name: p.encoding for p in plans}, compression=compression, **writer_kwargs)
    stats = ConversionStats()
    with writer, _progress(progress_bar, out) as bar:
        for batch in batches:
            written, skipped = write_batch(
                writer, batch, plans, null_policy, fill_values, stats.rows + stats.skipped_rows
            )
            stats.rows += written
            stats.skipped_rows += skipped
            bar.update(written)
    stats.add_shards(writer.shards)
    stats.rows_per_partition = [stats.rows]
    stats.seconds = time.perf_counter() - started
    return stats


def _undeclared_array(plan: ColumnPlan, columns: dict[str, str] | None) -> bool:
    # A declared encoding is used as given; only inferred ones get the fixed-shape form.
    return plan.kind == "ndarray" and plan.shape is None and columns is None


def detect_fixed_shape(plan: ColumnPlan, column: pa.Array | pa.ChunkedArray) -> ColumnPlan:
    """The fixed-shape form of an ndarray column when every non-null row has the same shape."""
    arr = plain(column)
    if len(arr) == 0:
        return plan
    dims = list_layout(arr, plan.ndim).dims[arr.is_valid().to_numpy(zero_copy_only=False)]
    if len(dims) and (dims == dims[0]).all() and dims[0].min() > 0:
        return with_shape(plan, tuple(dims[0].tolist()))
    return plan


def write_batch(
    writer: MDSWriter,
    batch: pa.RecordBatch | pa.Table,
    plans: list[ColumnPlan],
    null_policy: str,
    fill_values: dict[str, Any] | None,
    first_row: int,
    where: str = "",
) -> tuple[int, int]:
    """Encode and write one batch; returns (rows written, rows skipped)."""
    columns = {plan.name: plain(batch.column(plan.name)) for plan in plans}
    columns, skipped = resolve_nulls(columns, plans, null_policy, fill_values, first_row, where)
    try:
        data, sizes = encode_batch(columns, plans)
    except ShapeGuessMissed:
        raise
    except ConversionError as err:
        raise ConversionError(f"{err} (rows counted from {first_row}{where})") from err
    writer.write_encoded_many(data, sizes)
    return len(sizes), skipped


def _as_batches(data: Any, schema: pa.Schema | None) -> tuple[Iterator[Any], pa.Schema, pa.Table | None]:
    """Record batches of ``data``, their schema, and the whole table when it is in memory."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if _is_pandas(data):
        data = pa.Table.from_pandas(data, schema=schema, preserve_index=False)
    if isinstance(data, pa.Table):
        return iter(data.to_batches(BATCH_ROWS)), data.schema, data
    if isinstance(data, pa.RecordBatchReader):  # streamed (delta_to_mds): one batch in memory at a time
        return iter(data), data.schema, None
    if isinstance(data, (str, bytes, dict)) or not isinstance(data, Iterable):
        raise ConversionError(
            f"table_to_mds takes a pyarrow Table, a pandas DataFrame or an iterable of dicts, got {type(data).__name__}"
        )
    return _dict_batches(iter(data), schema)


def _dict_batches(rows: Iterator[dict[str, Any]], schema: pa.Schema | None) -> tuple[Iterator[Any], pa.Schema, None]:
    first = list(itertools.islice(rows, BATCH_ROWS))
    if not first and schema is None:
        raise ConversionError("table_to_mds got no rows and no schema")
    head = _from_dicts(first, schema, 0)
    schema = head.schema

    def batches() -> Iterator[pa.Table]:
        yield head
        start = len(first)
        while chunk := list(itertools.islice(rows, BATCH_ROWS)):
            yield _from_dicts(chunk, schema, start)
            start += len(chunk)

    return batches(), schema, None


def _from_dicts(chunk: list[dict[str, Any]], schema: pa.Schema | None, start: int) -> pa.Table:
    try:
        return pa.Table.from_pylist(chunk, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
        raise ConversionError(
            f"rows {start}..{start + len(chunk) - 1} do not fit the columns' types ({err}); pass schema= "
            "to fix the types"
        ) from err


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "to_records")


def _progress(enabled: bool | None, out: Any) -> tqdm:
    # disable=None: shown only on a terminal; delay: only for conversions that take a while.
    return tqdm(
        desc=f"rows -> {out}",
        unit="row",
        unit_scale=True,
        disable={False: True, None: None}.get(enabled, False),
        delay=0 if enabled else 1.0,
    )
