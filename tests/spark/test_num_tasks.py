"""mds_kwargs['num_tasks']: how many tasks write (one sub-directory each), whatever the DataFrame's partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from mds_core import LocalDataset, dataframe_to_mds
from mds_core.convert.cluster import default_parallelism
from mds_core.errors import ConversionError
from tests.spark.test_dataframe_to_mds import _frame


def test_num_tasks_repartitions_and_auto_is_the_default_parallelism(spark, tmp_path: Path) -> None:
    result = dataframe_to_mds(_frame(spark, partitions=8), mds_kwargs={"out": str(tmp_path / "three"), "num_tasks": 3})
    assert len(result.stats.rows_per_partition) == 3 and sum(result.stats.rows_per_partition) == 400
    assert sorted(int(s["id"]) for s in LocalDataset(tmp_path / "three")) == list(range(400))

    cores = default_parallelism(spark)  # the fixture sets spark.default.parallelism
    assert cores == int(spark.conf.get("spark.default.parallelism"))
    result = dataframe_to_mds(
        _frame(spark, partitions=1), mds_kwargs={"out": str(tmp_path / "auto"), "num_tasks": "auto"}
    )
    assert len(result.stats.rows_per_partition) == cores


@pytest.mark.parametrize("bad", [0, -1, "many", 2.5, True])
def test_bad_num_tasks_is_refused_before_writing(spark, tmp_path: Path, bad) -> None:
    with pytest.raises(ConversionError, match="num_tasks"):
        dataframe_to_mds(_frame(spark), mds_kwargs={"out": str(tmp_path / "out"), "num_tasks": bad})
    assert not (tmp_path / "out").exists()
