"""Fixtures and utilities the reference's tests import from ``tests.common.utils``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from streaming import MDSWriter

from tests.common.datasets import NumberAndSayDataset, SequenceDataset


@pytest.fixture
def local_remote_dir() -> Iterator[tuple[str, str]]:
    """Two paths, ``local`` and ``remote``, inside a fresh temporary directory (neither created)."""
    with tempfile.TemporaryDirectory() as root:
        yield os.path.join(root, "local"), os.path.join(root, "remote")


@pytest.fixture
def compressed_local_remote_dir() -> Iterator[tuple[str, str, str]]:
    """Three paths, ``compressed``, ``local`` and ``remote``, inside a fresh temporary directory."""
    with tempfile.TemporaryDirectory() as root:
        yield os.path.join(root, "compressed"), os.path.join(root, "local"), os.path.join(root, "remote")


def convert_to_mds(**kwargs: Any) -> None:
    """Write ``num_samples`` (117) samples of ``dataset_name`` to ``out_root`` (256-byte shards by default)."""
    name = kwargs["dataset_name"].lower()
    num_samples = kwargs.get("num_samples", 117)
    if name == "sequencedataset":
        dataset: Any = SequenceDataset(num_samples, offset=kwargs.get("offset", 0))
    elif name == "numberandsaydataset":
        dataset = NumberAndSayDataset(num_samples)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    columns = dict(zip(dataset.column_names, dataset.column_encodings))
    with MDSWriter(
        out=kwargs["out_root"],
        columns=columns,
        keep_local=kwargs.get("keep_local", False),
        compression=kwargs.get("compression"),
        hashes=kwargs.get("hashes"),
        size_limit=kwargs.get("size_limit", 1 << 8),
    ) as out:
        for sample in dataset:
            out.write(sample)


def get_config_in_bytes(
    format: str,
    size_limit: int,
    column_names: list[str],
    column_encodings: list[str],
    column_sizes: list[int | None],
    compression: str | None = None,
    hashes: list[str] | None = None,
) -> bytes:
    """The JSON config an MDS shard header holds (sorted keys), as bytes."""
    config = {
        "version": 2,
        "format": format,
        "compression": compression,
        "hashes": hashes or [],
        "size_limit": size_limit,
        "column_names": column_names,
        "column_encodings": column_encodings,
        "column_sizes": column_sizes,
    }
    return json.dumps(config, sort_keys=True).encode("utf-8")


def copy_all_files(source: str, destination: str) -> None:
    """Copy the files (not the sub-directories) of ``source`` into ``destination``."""
    os.makedirs(destination, exist_ok=True)
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if os.path.isfile(path):
            shutil.copy2(path, os.path.join(destination, name))
