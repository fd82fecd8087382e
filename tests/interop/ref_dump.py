"""Run by the reference's environment (benchmarks/.venv): read a dataset with Mosaic Streaming and
print every sample as one line of tagged JSON (the fixtures' format) on stdout.

Usage: python ref_dump.py DATASET_DIR [--allow-unsafe-types] [--validate-hash ALGO] [--index INDEX_JSON]
   or: python ref_dump.py --many JOBS.json   (many datasets, one reference process)

``--index`` reads DATASET_DIR through another index.json (basenames relative to DATASET_DIR), placed in
the local cache first, which the reference then uses as is: how it reads any version of a shard set.
"""

from __future__ import annotations

import base64
import decimal
import json
import os
import shutil
import tempfile

import numpy as np


def tag(value):
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return {"t": "np", "dtype": value.dtype.name, "b64": base64.b64encode(value.tobytes()).decode()}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": str(value)}
    if isinstance(value, float):
        return {"t": "float", "v": repr(value)}
    if value is None:
        return {"t": "none"}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, bytes):
        return {"t": "bytes", "b64": base64.b64encode(value).decode()}
    if isinstance(value, decimal.Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
        return {
            "t": "ndarray",
            "dtype": value.dtype.name,
            "shape": list(value.shape),
            "b64": base64.b64encode(data).decode(),
        }
    if hasattr(value, "getpixel"):
        return {
            "t": "image",
            "mode": value.mode,
            "size": list(value.size),
            "b64": base64.b64encode(value.tobytes()).decode(),
        }
    for kind in (list, tuple, set):
        if isinstance(value, kind):
            return {"t": kind.__name__, "v": [tag(v) for v in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": {k: tag(v) for k, v in value.items()}}
    raise TypeError(f"cannot tag {type(value)}")


def dump(path: str, out, allow_unsafe_types: bool = False, validate_hash: str | None = None, index: str | None = None):
    """Every sample of the dataset at ``path``, as read by the reference, one tagged-JSON line each into ``out``."""
    from streaming import StreamingDataset

    # No clean_stale_shared_memory(): it would unlink the segments of a reference process running in parallel.
    # remote=path, local=scratch: the reference copies, checks and decompresses into scratch.
    with tempfile.TemporaryDirectory() as scratch:
        if index:
            shutil.copyfile(index, os.path.join(scratch, "index.json"))
        dataset = StreamingDataset(
            remote=path, local=scratch, batch_size=1, allow_unsafe_types=allow_unsafe_types, validate_hash=validate_hash
        )
        for i in range(dataset.num_samples):
            out.write(json.dumps({col: tag(v) for col, v in dataset[i].items()}) + "\n")
        del dataset


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", help="one dataset, dumped to stdout")
    parser.add_argument("--allow-unsafe-types", action="store_true")
    parser.add_argument("--validate-hash", default=None)
    parser.add_argument("--index", default=None)
    # Many datasets in one process (the reference's imports take seconds): a JSON list of
    # {"path", "out", and optionally "allow_unsafe_types", "validate_hash", "index"}; each dumped to its "out".
    parser.add_argument("--many", default=None, help="a JSON file listing datasets to dump")
    args = parser.parse_args()
    if args.many:
        with open(args.many) as listing:
            jobs = json.load(listing)
        for job in jobs:
            with open(job.pop("out"), "w") as out:
                dump(job.pop("path"), out, **job)
        return
    dump(args.path, sys.stdout, args.allow_unsafe_types, args.validate_hash, args.index)


if __name__ == "__main__":
    main()
