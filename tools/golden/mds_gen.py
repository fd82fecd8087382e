"""Write tests/fixtures/mds-golden with the reference: its MDSWriter writes, its StreamingDataset reads back.

Runs in benchmarks/.venv, where ``streaming`` is Mosaic Streaming itself.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import PIL
import streaming
from PIL import Image
from streaming import MDSWriter, StreamingDataset
from streaming.base.util import merge_index

from tools.golden.mds_cases import CASES, MdsCase
from tools.golden.tagged import sample_line, value_line


def producer() -> str:
    return f"mosaicml-streaming {streaming.__version__} (reference), numpy {np.__version__}, Pillow {PIL.__version__}"


def _as_image_files(sample: dict[str, Any], columns: dict[str, str], scratch: Path) -> dict[str, Any]:
    """jpeg and png values are given as encoded bytes, but the reference's encoders take PIL images.

    An image opened from a file makes its JPEG encoder copy the file's bytes unchanged; its PNG encoder
    always re-encodes, which gives the same bytes back for a PNG Pillow wrote with its defaults.
    """
    sample = dict(sample)
    for col, encoding in columns.items():
        if encoding in ("jpeg", "png"):
            with tempfile.NamedTemporaryFile(dir=scratch, suffix=f".{encoding}", delete=False) as file:
                file.write(sample[col])
            sample[col] = Image.open(file.name)
    return sample


def _write(out: Path, columns: dict[str, str], kwargs: dict[str, Any], samples: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as scratch, MDSWriter(out=str(out), columns=columns, **kwargs) as writer:
        for sample in samples:
            writer.write(_as_image_files(sample, columns, Path(scratch)))


def write_dataset(case: MdsCase, samples: list[dict[str, Any]], out: Path) -> None:
    """The reference writer's output for one case in ``out``; partitions are merged with merge_index."""
    kwargs = {k: v for k, v in case.writer_kwargs.items() if k != "partitions"}
    parts = case.writer_kwargs.get("partitions")
    if not parts:
        _write(out, case.columns, kwargs, samples)
        return
    start = 0
    for part, count in zip(parts, case.part_sizes, strict=True):
        _write(out / part, case.columns, kwargs, samples[start : start + count])
        start += count
    merge_index(str(out))


def read_back(path: Path, allow_unsafe_types: bool) -> list[dict[str, Any]]:
    """``dataset[i]`` for every sample, read by the reference as a user would, from a copy (remote=path).

    Reading from a local cache keeps the dataset as the writer left it: the reference decompresses
    shards beside their compressed files.
    """
    with tempfile.TemporaryDirectory() as scratch:
        dataset = StreamingDataset(remote=str(path), local=scratch, batch_size=1, allow_unsafe_types=allow_unsafe_types)
        rows = [dataset[i] for i in range(dataset.num_samples)]
        del dataset  # its destructor gives up the local folder it registered, before the folder goes
    return rows


def _lines(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def generate_case(case: MdsCase, golden: Path) -> dict[str, Any]:
    """samples/, datasets/ and expected/ for one case; returns its entry of cases.json."""
    samples = case.load_samples()
    (golden / "samples" / f"{case.name}.jsonl").write_text(_lines([sample_line(s, case.columns) for s in samples]))
    dataset = golden / "datasets" / case.name
    write_dataset(case, samples, dataset)
    # The reference refuses to stream a dataset without samples ("Stream contains no samples").
    rows = read_back(dataset, case.allow_unsafe_types) if samples else []
    (golden / "expected" / f"{case.name}.jsonl").write_text(_lines([value_line(row) for row in rows]))
    shards = json.loads((dataset / "index.json").read_text())["shards"]
    return {
        "name": case.name,
        "columns": case.columns,
        "writer_kwargs": case.writer_kwargs,
        "num_samples": len(samples),
        "num_shards": len(shards),
        "writer_bytes_equal": case.writer_bytes_equal,
        "allow_unsafe_types": case.allow_unsafe_types,
        "notes": case.notes,
    }


def generate_mds(out: Path, names: list[str] | None = None) -> None:
    """tests/fixtures/mds-golden's layout under ``out``/mds-golden, for every case or the ``names`` given."""
    golden = out / "mds-golden"
    for sub in ("samples", "datasets", "expected"):
        (golden / sub).mkdir(parents=True, exist_ok=True)
    cases = [case for case in CASES if names is None or case.name in names]
    entries = [generate_case(case, golden) for case in cases]
    (golden / "cases.json").write_text(json.dumps({"producer": producer(), "cases": entries}, indent=1))
