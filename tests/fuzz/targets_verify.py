"""Detection: every corrupted byte of a shard file whose digests the index records is reported by ``mds verify``.

Other targets check that bad input is refused cleanly; this one checks that it is noticed at all.
Two datasets are written with hashes: plain shards, and zstd shards that a reader has already
decompressed in place (readers then use the raw copy, so verify must check it too).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from mds_core import LocalDataset, MDSWriter
from mds_core.format.verify import verify_dataset
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_bytes


def hashed_datasets(workdir: str) -> list[str]:
    """Two small datasets with digests recorded: three raw shards (sha1, xxh64); three zstd ones (md5, xxh64)."""
    import numpy as np

    roots = []
    for name, args in (
        ("raw", {"hashes": ["sha1", "xxh64"]}),
        ("zstd", {"hashes": ["md5", "xxh64"], "compression": "zstd"}),
    ):
        root = os.path.join(workdir, f"hashed-{name}")
        roots.append(root)
        if os.path.exists(os.path.join(root, "index.json")):
            continue
        columns = {"id": "int", "text": "str", "vec": "ndarray:int16"}
        with MDSWriter(out=root, columns=columns, size_limit=400, **args) as writer:
            for i in range(12):
                writer.write({"id": i, "text": "t" * (i % 5), "vec": np.arange(i % 4 + 1, dtype=np.int16)})
        with LocalDataset(root) as dataset:  # decompresses zstd shards in place, as any first read does
            list(dataset)
    return roots


def shard_files(root: str) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.startswith("shard."))


class VerifyTarget:
    """One shard file corrupted (one byte changed, or a few byte-level mutations) -> ``verify_dataset``."""

    name = "verify"

    def setup(self, workdir: str) -> None:
        roots = hashed_datasets(workdir)
        self.files = {(root, name): Path(root, name).read_bytes() for root in roots for name in shard_files(root)}
        self.keys = sorted(self.files)

    def generate(self, rng: random.Random) -> dict[str, Any]:
        root, name = rng.choice(self.keys)
        data = bytearray(self.files[root, name])
        if rng.random() < 0.6:  # the case digests exist for: one byte changed in place
            data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
            mutated = bytes(data)
        else:
            mutated = mutate_bytes(rng, bytes(data))
        return {"dataset": os.path.basename(root), "file": name, "data": mutated}

    def check(self, case: dict[str, Any]) -> None:
        root = next(r for r, _ in self.keys if os.path.basename(r) == case["dataset"])
        check_detected(root, case["file"], case["data"], self.files[root, case["file"]])


def check_detected(root: str, name: str, data: bytes, original: bytes, run: Any = None) -> None:
    """Write ``data`` over ``root/name``, verify (``run(root) -> (ok, text)``), restore the file.

    A changed file must fail verification with a problem naming it; an unchanged one must pass.
    """
    path = Path(root, name)
    path.write_bytes(data)
    try:
        ok, text = (run or _verify)(root)
    finally:
        path.write_bytes(original)
    if data == original and not ok:
        raise PropertyFailure("false alarm", f"{name} unchanged but verify failed: {text[:200]}")
    if data != original and (ok or name not in text):
        raise PropertyFailure(
            "corruption missed",
            f"{root}/{name} changed ({len(data)} bytes) but verify said {'OK' if ok else text[:200]}",
        )


def _verify(root: str) -> tuple[bool, str]:
    report = verify_dataset(root)
    return report.ok, "\n".join(report.problems)
