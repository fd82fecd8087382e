"""The reference (Mosaic Streaming 0.13, in benchmarks/.venv) reads what dataframe_to_mds writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mds_core import LocalDataset, dataframe_to_mds
from tests.golden import assert_same
from tests.spark.test_spark_types import _rows, _schema
from tests.test_interop import REF_PYTHON, _reference_reads

pytestmark = pytest.mark.skipif(not REF_PYTHON.exists(), reason="needs the reference: run `make interop`")


def test_the_reference_reads_every_type_we_convert(spark, tmp_path: Path) -> None:
    out = tmp_path / "out"
    frame = spark.createDataFrame(_rows() * 3, _schema()).repartition(3)
    dataframe_to_mds(frame, mds_kwargs={"out": str(out), "hashes": ["sha1", "xxh64"], "size_limit": "1kb"})
    theirs = _reference_reads(out, "--validate-hash", "xxh64")
    ours = list(LocalDataset(out, cache_dir=tmp_path / "cache"))
    assert len(theirs) == len(ours) == 12
    for i, (a, b) in enumerate(zip(theirs, ours)):
        assert list(a) == list(b)
        for name in a:
            assert_same(a[name], b[name], f"sample {i} column {name}")
