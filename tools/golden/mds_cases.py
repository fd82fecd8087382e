"""The cases of tests/fixtures/mds-golden: what the reference's MDSWriter is given, one entry per dataset.

A case's samples come from its ``samples`` function, or, where it has none, from the inputs recorded in
tests/fixtures/mds-golden/samples/<name>.jsonl: those were drawn at random when the fixtures were first
made, and the recorded values are the only copy of them. The list's order is the order of cases.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.golden.tagged import read_lines

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
RECORDED_SAMPLES = FIXTURES / "mds-golden" / "samples"


@dataclass(frozen=True)
class MdsCase:
    name: str
    columns: dict[str, str]
    # What MDSWriter is given besides out and columns; "partitions" is ours: one writer per sub-directory.
    writer_kwargs: dict[str, Any]
    notes: str
    writer_bytes_equal: bool = True
    allow_unsafe_types: bool = False
    samples: Callable[[], list[dict[str, Any]]] | None = None
    part_sizes: tuple[int, ...] = field(default=())  # samples per partition, with writer_kwargs["partitions"]

    def load_samples(self) -> list[dict[str, Any]]:
        """The samples given to the writer, in order."""
        if self.samples is not None:
            return self.samples()
        return read_lines((RECORDED_SAMPLES / f"{self.name}.jsonl").read_text())


MIXED = {"id": "int", "label": "int32", "text": "str", "image": "bytes", "emb": "ndarray:float32:16"}
HASHES = ["md5", "sha256", "xxh3_64"]


def _compressed(codec: str) -> MdsCase:
    return MdsCase(
        name=f"mixed_{codec.replace(':', '_')}",
        columns=MIXED,
        writer_kwargs={"compression": codec, "size_limit": 16384, "hashes": HASHES},
        notes=f"compression {codec}; raw shard bytes must match exactly, compressed bytes need not",
    )


CASES: list[MdsCase] = [
    MdsCase(
        "scalars",
        {
            "int": "int",
            **{f"i{bits}": f"int{bits}" for bits in (8, 16, 32, 64)},
            **{f"u{bits}": f"uint{bits}" for bits in (8, 16, 32, 64)},
            **{f"f{bits}": f"float{bits}" for bits in (16, 32, 64)},
        },
        {},
        "every fixed-size numeric encoding with edge values (min/max, -0.0, inf, nan)",
    ),
    MdsCase(
        "text",
        {"s": "str", "b": "bytes", "si": "str_int", "sf": "str_float", "sd": "str_decimal", "j": "json"},
        {},
        "str, bytes, str_int, str_float, str_decimal, json, incl. empty values and non-ASCII",
    ),
    MdsCase(
        "arrays",
        {"dyn": "ndarray", "f32": "ndarray:float32", "fixed": "ndarray:int16:2,3", "tok": "ndarray:uint16:512"},
        {},
        "ndarray dynamic dtype+shape (all 11 dtypes, dims >255 and >65535), dynamic shape, fixed shape",
    ),
    MdsCase(
        "images",
        {"pil": "pil", "jpeg": "jpeg", "png": "png", "pils": "list[pil]", "jarr": "jpeg_array"},
        {},
        "pil (RGB/L/RGBA raw), jpeg and png given as encoded bytes (pass-through), list[pil], jpeg_array",
    ),
    MdsCase(
        "mixed_multishard",
        MIXED,
        {"size_limit": 8192, "hashes": ["sha1", "xxh64"]},
        "many shards via size_limit=8192, hashes on raw data",
    ),
    *(_compressed(codec) for codec in ("zstd", "zstd:19", "gz", "bz2", "br", "snappy")),
    MdsCase(
        "pkl_unsafe",
        {"obj": "pkl", "id": "int"},
        {},
        "pkl column: readable only with allow_unsafe_types=True",
        allow_unsafe_types=True,
        samples=lambda: [{"obj": {"k": i, "t": (1, 2), "s": {3}}, "id": i} for i in range(4)],
    ),
    MdsCase(
        "zero_sample_shard",
        {"b": "bytes"},
        {"size_limit": 256},
        "reference quirk: contains 0-sample shards; readers must accept them; writers need not reproduce them",
        writer_bytes_equal=False,
        # A sample bigger than size_limit makes the reference close the open shard first, even an empty one.
        samples=lambda: [{"b": bytes([i]) * (300 if i % 3 == 0 else 40)} for i in range(7)],
    ),
    MdsCase(
        "empty",
        MIXED,
        {},
        "zero samples: index has no shards; the reference reader refuses to stream it",
        samples=list,  # no samples at all
    ),
    MdsCase(
        "merged",
        MIXED,
        {"size_limit": 4096, "partitions": ["part0", "part1", "part2"]},
        "three writers in part0..part2 merged with merge_index(root): basenames carry the sub-directory",
        part_sizes=(10, 11, 12),
    ),
]
