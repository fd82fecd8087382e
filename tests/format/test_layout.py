"""Where each column of each sample lies (``Schema.column_layout``), for schemas with and without variable columns."""

from __future__ import annotations

import numpy as np
import pytest

from mds_core.errors import CorruptShardError
from mds_core.format.shard import Schema


def test_a_fixed_layout_is_the_same_in_every_sample_and_names_the_first_sample_of_another_length() -> None:
    schema = Schema.from_columns({"b": "ndarray:uint8:3", "a": "int"})  # stored a (8 bytes), then b (3 bytes)
    u8 = np.zeros(40, np.uint8)
    starts, sizes = schema.column_layout(u8, np.array([0, 11]), np.array([11, 22]))
    assert starts.tolist() == [[0, 8], [11, 19]]
    assert sizes.tolist() == [[8, 3], [8, 3]]
    with pytest.raises(CorruptShardError, match=r"^sample 7 has column sizes that do not add up to its length$"):
        schema.column_layout(u8, np.array([0, 11, 22]), np.array([11, 22, 34]), first=5)


def test_a_variable_layout_reads_each_sample_s_size_table() -> None:
    schema = Schema.from_columns({"a": "int", "t": "str"})  # a u32 size for t, then a (8 bytes), then t
    samples = [schema.encode({"a": 1, "t": "xy"}), schema.encode({"a": 2, "t": ""})]
    data = b"".join(samples)
    starts, sizes = schema.column_layout(np.frombuffer(data, np.uint8), np.array([0, 14]), np.array([14, 26]))
    assert starts.tolist() == [[4, 12], [18, 26]]
    assert sizes.tolist() == [[8, 2], [8, 0]]
    with pytest.raises(CorruptShardError, match=r"^sample 1 has column sizes that do not add up to its length$"):
        schema.column_layout(np.frombuffer(data + b"z", np.uint8), np.array([0, 14]), np.array([14, 27]))
