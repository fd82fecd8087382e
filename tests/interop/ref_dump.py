"""Run by the reference's environment (benchmarks/.venv): read a dataset with Mosaic Streaming and
print every sample as one line of tagged JSON (the fixtures' format) on stdout.

Usage: python ref_dump.py DATASET_DIR [--allow-unsafe-types] [--validate-hash ALGO] [--index INDEX_JSON]
   or: python ref_dump.py --many JOBS.json   (many datasets, one reference process)

``--index`` reads DATASET_DIR through another index.json (basenames relative to DATASET_DIR), placed in
the local cache first, which the reference then uses as is: how it reads any version of a shard set.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# The fixtures' tagged JSON, as the golden-fixture generators write it (this runs as a script, in the
# reference's environment, so the project's root goes on the path first).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools.golden.tagged import tag


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
