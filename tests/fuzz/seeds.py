"""Seed inputs: the reference's golden datasets (tests/fixtures/mds-golden) and small datasets written here.

The golden files are real output of Mosaic Streaming's writer, so mutations start from exactly
what readers meet in practice; ``all_encodings_dataset`` adds a shard with every encoding of the
registry, which the golden files do not cover together.
"""

from __future__ import annotations

import io
import os
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mds_core.format.index import ShardInfo, parse_index

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "mds-golden" / "datasets"
RAW_DATASETS = ["arrays", "images", "merged", "mixed_multishard", "pkl_unsafe", "scalars", "text", "zero_sample_shard"]
ZIP_DATASETS = ["mixed_br", "mixed_bz2", "mixed_gz", "mixed_snappy", "mixed_zstd", "mixed_zstd_19"]
SHARDS_PER_DATASET = 2  # more shards of the same dataset add seeds, not new code paths


def golden_index_texts() -> list[bytes]:
    return [(path / "index.json").read_bytes() for path in sorted(GOLDEN.iterdir()) if (path / "index.json").exists()]


def shards_of(root: Path) -> list[ShardInfo]:
    return parse_index((root / "index.json").read_bytes(), str(root))[:SHARDS_PER_DATASET]


@cache
def raw_shard_seeds(extra_root: str | None = None) -> list[tuple[str, ShardInfo, bytes]]:
    """(name, index entry, shard bytes) of uncompressed shards: golden ones, then those under ``extra_root``."""
    roots = [GOLDEN / name for name in RAW_DATASETS] + ([Path(extra_root)] if extra_root else [])
    return [
        (f"{root.name}/{shard.raw_data.basename}", shard, (root / shard.raw_data.basename).read_bytes())
        for root in roots
        for shard in shards_of(root)
    ]


@cache
def zip_shard_seeds() -> list[tuple[str, ShardInfo, bytes]]:
    """(name, index entry, compressed bytes) of every codec's golden shards."""
    seeds = [(GOLDEN / name, shard) for name in ZIP_DATASETS for shard in shards_of(GOLDEN / name)]
    # A compressed shard's last file is its zip.
    return [(f"{root.name}/{s.files[-1].basename}", s, (root / s.files[-1].basename).read_bytes()) for root, s in seeds]


def _images() -> dict[str, Any]:
    from PIL import Image

    rgb = Image.fromarray(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), "RGB")
    gray = Image.fromarray(np.arange(4 * 4, dtype=np.uint8).reshape(4, 4) * 9, "L")
    jpeg = io.BytesIO()
    rgb.save(jpeg, format="JPEG")
    return {
        "pil": gray,
        "jpeg": rgb,
        "png": gray,
        "list[pil]": [gray, rgb],
        "list[jpeg]": [rgb],
        "list[png]": [gray, gray],
        "jpeg_array": [jpeg.getvalue()],
        "jpegarray": [jpeg.getvalue()] * 2,
    }


def sample_values(i: int) -> dict[str, Any]:
    """Sample ``i`` of the all-encodings dataset: one column per encoding name (plus ndarray forms)."""
    values: dict[str, Any] = {
        "bytes": bytes(range(i + 3)),
        "str": "héllo" * i,
        "int": -(10**i),
        "str_int": 7 * i - 3,
        "str_float": 1.5 / (i + 1),
        "str_decimal": Decimal(f"{i}.25"),
        "json": {"k": [i, None, "v"]},
        "pkl": {"set": {i}, "t": (1, 2.0)},
        "ndarray": np.arange(i + 2, dtype=np.int32).reshape(1, -1),
        "ndarray:float32": np.ones(i + 1, np.float32),
        "ndarray:uint8:2,3": np.full((2, 3), i, np.uint8),
    }
    for dtype in "int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split():
        values[dtype] = np.dtype(dtype).type(i + 1)
    values.update(_images())
    return values


def column_name(encoding: str) -> str:
    return "c_" + "".join(ch if ch.isalnum() else "_" for ch in encoding)


def write_rows(out: str, ids: range, repeat: int = 1, **writer_args: Any) -> str:
    """A dataset of ``{"id": i, "text": f"row {i}" * repeat}`` for each ``i`` in ``ids``, under ``out``."""
    from mds_core import MDSWriter

    with MDSWriter(out=out, columns={"id": "int", "text": "str"}, **writer_args) as writer:
        for i in ids:
            writer.write({"id": i, "text": f"row {i}" * repeat})
    return out


def all_encodings_dataset(out: str, samples: int = 4, **writer_args: Any) -> str:
    """An MDS dataset under ``out`` with one column per encoding of the registry (the same bytes every run)."""
    from mds_core import MDSWriter

    if os.path.exists(os.path.join(out, "index.json")):
        return out
    columns = {column_name(e): e for e in sample_values(0)}
    with MDSWriter(out=out, columns=columns, **writer_args) as writer:
        for i in range(samples):
            writer.write({column_name(e): v for e, v in sample_values(i).items()})
    return out
