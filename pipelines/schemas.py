"""pandera.pyspark schemas for the validated tables, and the row-level split into valid and quarantined.

pandera's PySpark backend judges a whole DataFrame (it reports which column failed which check, not
which rows). To quarantine rows with a reason, each column's nullability and built-in checks are
translated into Spark expressions here; rules pandera cannot state per row (an array's length) are
listed beside the schema. The valid part is then validated by pandera itself, so the two can not
silently disagree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

# pyspark.pandas (imported by pandera.pyspark) warns about its own pandas support on import.
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

if TYPE_CHECKING:
    from pandera.api.pyspark.container import DataFrameSchema
    from pyspark.sql import Column, DataFrame


@dataclass(frozen=True)
class RowRule:
    """One reason a row can be quarantined: ``fails()`` is a Spark Column, true for a bad row."""

    reason: str
    fails: Callable[[], Column]


@dataclass(frozen=True)
class ValidationSchema:
    """A pandera.pyspark schema plus the per-row rules it cannot express."""

    name: str
    build: Callable[[], DataFrameSchema]
    extra_rules: Callable[[], list[RowRule]] = field(default=list)

    def row_rules(self) -> list[RowRule]:
        """The schema's column rules, then its extra rules."""
        return column_rules(self.build()) + self.extra_rules()


def digits_schema() -> DataFrameSchema:
    """Handwritten digits (and the synthetic generator): an id, a label 0-9, 8x8 pixels 0-16, a day."""
    import pandera.pyspark as pa
    from pyspark.sql import types as T

    return pa.DataFrameSchema(
        name="digits",
        columns={
            "id": pa.Column(T.LongType(), pa.Check.ge(0), nullable=False),
            "label": pa.Column(T.IntegerType(), pa.Check.in_range(0, 9), nullable=False),
            # cast: pandera's dtype annotation lists a few pyspark types only, not ArrayType (nor DataType
            # in general), which its pyspark engine accepts.
            "pixels": pa.Column(cast(Any, T.ArrayType(T.ByteType(), containsNull=True)), nullable=False),
            "day": pa.Column(T.StringType(), pa.Check.str_matches(r"^\d{4}-\d{2}-\d{2}$"), nullable=False),
        },
        strict=True,
    )


def _digits_pixel_rules() -> list[RowRule]:
    from pyspark.sql import functions as F

    pixels = F.col("pixels")
    return [
        RowRule("pixels: not 64 values", lambda: F.size(pixels) != 64),
        RowRule("pixels: value outside 0..16", lambda: F.exists(pixels, lambda v: v.isNull() | (v < 0) | (v > 16))),
    ]


DIGITS = ValidationSchema("digits", digits_schema, _digits_pixel_rules)


def not_null_schema(frame: DataFrame) -> ValidationSchema:
    """For a user's own table with no schema of its own: its columns and types, nothing null."""
    import pandera.pyspark as pa

    def build() -> DataFrameSchema:
        # cast: any pyspark DataType, which pandera's engine accepts but its dtype annotation does not list.
        columns = {f.name: pa.Column(cast(Any, f.dataType), nullable=False) for f in frame.schema.fields}
        return pa.DataFrameSchema(name="source", columns=columns)

    return ValidationSchema("source", build)


_CHECK_EXPRESSIONS: dict[str, Callable[[Column, dict[str, Any]], Column]] = {
    # Each builds the *passing* condition of a pandera built-in check from its statistics.
    "greater_than": lambda c, s: c > s["min_value"],
    "greater_than_or_equal_to": lambda c, s: c >= s["min_value"],
    "less_than": lambda c, s: c < s["max_value"],
    "less_than_or_equal_to": lambda c, s: c <= s["max_value"],
    "equal_to": lambda c, s: c == s["value"],
    "not_equal_to": lambda c, s: c != s["value"],
    "isin": lambda c, s: c.isin(list(s["allowed_values"])),
    "notin": lambda c, s: ~c.isin(list(s["forbidden_values"])),
    "str_matches": lambda c, s: c.rlike(_anchored(s["pattern"])),
    "str_contains": lambda c, s: c.rlike(str(s["pattern"])),
    "str_startswith": lambda c, s: c.startswith(s["string"]),
    "str_endswith": lambda c, s: c.endswith(s["string"]),
    "in_range": lambda c, s: _in_range(c, s),
}


def _anchored(pattern: Any) -> str:
    text = getattr(pattern, "pattern", pattern)
    return text if str(text).startswith("^") else f"^{text}"


def _in_range(column: Column, stats: dict[str, Any]) -> Column:
    # A comparison with a value of unknown type: pyspark's overloads then give Any, though it is a Column.
    low: Column = column >= stats["min_value"] if stats.get("include_min", True) else column > stats["min_value"]
    high: Column = column <= stats["max_value"] if stats.get("include_max", True) else column < stats["max_value"]
    return low & high


def column_rules(schema: DataFrameSchema) -> list[RowRule]:
    """Row rules from a schema's columns: nullability first, then every built-in check."""
    rules: list[RowRule] = []
    for name, column in schema.columns.items():
        if not column.nullable:
            rules.append(RowRule(f"{name}: null", _is_null(name)))
        for check in column.checks:
            if check.name not in _CHECK_EXPRESSIONS:
                raise ValueError(
                    f"schema {schema.name!r}, column {name!r}: check {check.name!r} has no "
                    "row-level form; add a RowRule for it beside the schema"
                )
            build = _CHECK_EXPRESSIONS[check.name]
            stats = dict(check.statistics)
            rules.append(RowRule(f"{name}: fails {check.name} {_describe(stats)}", _fails(name, build, stats)))
    return rules


def _is_null(name: str) -> Callable[[], Column]:
    from pyspark.sql import functions as F

    return lambda: F.col(name).isNull()


def _fails(name: str, build: Callable[[Column, dict[str, Any]], Column], stats: dict[str, Any]) -> Callable[[], Column]:
    from pyspark.sql import functions as F

    return lambda: ~build(F.col(name), stats)


def _describe(stats: dict[str, Any]) -> str:
    return ", ".join(f"{key}={getattr(value, 'pattern', value)}" for key, value in stats.items())


def split_rows(frame: DataFrame, table_schema: ValidationSchema) -> tuple[DataFrame, DataFrame]:
    """(valid rows, quarantined rows with a ``reason`` column naming every rule the row breaks).

    A missing column or a column of the wrong type is not a row problem: that raises, naming it.
    """
    from pyspark.sql import functions as F

    _check_columns(frame, table_schema.build())
    reasons = [F.when(rule.fails(), F.lit(rule.reason)) for rule in table_schema.row_rules()]
    # concat_ws skips nulls: a row that breaks no rule gets an empty reason.
    tagged = frame.withColumn("reason", F.concat_ws("; ", *reasons) if reasons else F.lit(""))
    valid = tagged.where(F.col("reason") == "").drop("reason")
    quarantined = tagged.where(F.col("reason") != "")
    return valid, quarantined


def _check_columns(frame: DataFrame, schema: DataFrameSchema) -> None:
    actual = {f.name: f.dataType for f in frame.schema.fields}
    for name, column in schema.columns.items():
        if name not in actual:
            raise ValueError(f"schema {schema.name!r}: column {name!r} is missing; the table has {sorted(actual)}")
        expected = column.dtype.type
        # simpleString ignores nullability (array<tinyint> either way), which the row rules check.
        if actual[name].simpleString() != expected.simpleString():
            raise ValueError(
                f"schema {schema.name!r}: column {name!r} is {actual[name].simpleString()}, "
                f"expected {expected.simpleString()}; cast it in the source or change the schema"
            )


def pandera_errors(frame: DataFrame, schema: DataFrameSchema) -> dict[str, Any]:
    """The verdict of pandera itself on a DataFrame (empty when it passes)."""
    validated = schema.validate(frame)
    return dict(validated.pandera.errors or {})
