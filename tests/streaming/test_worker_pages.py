"""What a DataLoader worker copies from the rank it forked from, as it reads its first samples.

A worker shares the rank's pages until it writes to them, and reading a Python object writes its count.
Opening a shard read its index entry and a tuple per shard: forked from a dataset of 10**4 shards, a process
that opened every shard grew 22.9 MiB, 18.8 MiB once opening read neither (the arrays of ``LocalDataset``,
``ShardOwners``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.streaming.support import run_python, write_ids

_SHARDS = 2_000

_FORKED_READS = """
import gc, os, struct, sys
from mds_core import StreamingDataset
def copied(address, pagemap):
    # /proc/self/pagemap: one 64-bit entry per page; bit 56 set when only this process maps the page.
    pagemap.seek(address // os.sysconf("SC_PAGE_SIZE") * 8)
    return bool(struct.unpack("<Q", pagemap.read(8))[0] >> 56 & 1)
dataset = StreamingDataset(local=sys.argv[1], job_root=sys.argv[2], batch_size=4)
shards = dataset.readers[0].shards
read_shards = range(0, len(shards), 4)  # a shuffled first batch reads a sample of many shards
# Where their entries lie, found before the fork: reading an entry in the child would copy its page.
addresses = [(id(shards[shard]), id(shards[shard].raw_data)) for shard in read_shards]
gc.freeze()  # as StreamingDataLoader does while its workers fork
if os.fork() == 0:
    samples = list(dataset._samples(dataset._shard_starts[read_shards]))
    assert [int(sample["id"]) for sample in samples] == [0] * len(read_shards)
    with open("/proc/self/pagemap", "rb") as pagemap:
        count = sum(copied(entry, pagemap) or copied(raw_data, pagemap) for entry, raw_data in addresses)
    print(count, len(addresses), flush=True)
    os._exit(0)
os.wait()
"""


def _many_shards(root: Path) -> Path:
    """``_SHARDS`` shards of 10 samples each: one shard written, linked under every name the index gives."""
    write_ids(root, 10)
    index = json.loads((root / "index.json").read_text())
    [entry] = index["shards"]
    first = entry["raw_data"]["basename"]
    index["shards"] = []
    for shard in range(_SHARDS):
        name = f"copy.{shard:05d}.mds"
        os.link(root / first, root / name)
        index["shards"].append({**entry, "raw_data": {**entry["raw_data"], "basename": name}})
    (root / "index.json").write_text(json.dumps(index))
    return root


def test_a_forked_worker_reading_a_shard_copies_no_index_entry_from_its_rank(tmp_path: Path) -> None:
    root = _many_shards(tmp_path / "data")
    done = run_python(_FORKED_READS, str(root), str(tmp_path / "jobs"))
    assert done.returncode == 0, done.stderr[-2000:]
    copied, read = map(int, done.stdout.split())
    assert read == _SHARDS // 4
    assert copied < read // 4, f"{copied} of the {read} index entries read lie on pages the worker copied"
