"""Run by the reference's environment (benchmarks/.venv): read a dataset with Mosaic Streaming and
print every sample as one line of tagged JSON (the fixtures' format) on stdout.

Usage: python ref_dump.py DATASET_DIR [--allow-unsafe-types] [--validate-hash ALGO] [--index INDEX_JSON]

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


def main() -> None:
    import argparse

    from streaming import StreamingDataset

    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--allow-unsafe-types", action="store_true")
    parser.add_argument("--validate-hash", default=None)
    parser.add_argument("--index", default=None)
    args = parser.parse_args()
    # No clean_stale_shared_memory(): it would unlink the segments of a reference process running in parallel.
    # remote=path, local=scratch: the reference copies, checks and decompresses into scratch.
    with tempfile.TemporaryDirectory() as scratch:
        if args.index:
            shutil.copyfile(args.index, os.path.join(scratch, "index.json"))
        dataset = StreamingDataset(
            remote=args.path,
            local=scratch,
            batch_size=1,
            allow_unsafe_types=args.allow_unsafe_types,
            validate_hash=args.validate_hash,
        )
        for index in range(dataset.num_samples):
            print(json.dumps({col: tag(v) for col, v in dataset[index].items()}))
        del dataset


if __name__ == "__main__":
    main()
