"""mds_core alone, without Spark or Dagster: write a small MDS dataset, inspect and verify it, read it back.

Run with `.venv/bin/python examples/demo.py [OUT_DIR]`; the default output is data/demo in the project.
(`make demo` is another thing: it runs the Dagster pipeline, `python -m pipelines.demo`.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mds_core import LocalDataset, MDSWriter

COLUMNS = {"id": "int", "label": "int32", "text": "str", "tokens": "ndarray:uint16:128"}


def main(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    num_samples = 20_000
    start = time.perf_counter()
    with MDSWriter(out=str(out), columns=COLUMNS, compression="zstd", hashes=["xxh3_64"], size_limit="1mb") as writer:
        for i in range(num_samples):
            writer.write(
                {
                    "id": i,
                    "label": i % 10,
                    "text": f"sample {i}: " + "lorem ipsum " * int(rng.integers(1, 8)),
                    "tokens": rng.integers(0, 50_000, 128, dtype=np.uint16),
                }
            )
    print(f"wrote {num_samples} samples to {out} in {time.perf_counter() - start:.2f} s")
    mds = [sys.executable, "-m", "mds_core.cli"]
    subprocess.run([*mds, "inspect", str(out)], check=True)
    subprocess.run([*mds, "verify", str(out)], check=True)
    dataset = LocalDataset(out)
    assert len(dataset) == num_samples
    assert [sample["id"] for sample in dataset] == list(range(num_samples)), "samples out of order"
    assert dataset[-1]["id"] == num_samples - 1
    print(f"read back {len(dataset)} samples in order; dataset[-1]['text'] = {dataset[-1]['text']!r}")
    subprocess.run([*mds, "head", str(out), "-n", "2"], check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "data" / "demo")
