"""Finding 7 of the review: a tiny index that claims many samples made readers allocate before any shard
was read (a 296-byte index cost ``mds plan`` 9 s and 960 MiB)."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from mds_core import StreamingDataset
from mds_core.cli import main
from mds_core.errors import EpochMemoryError
from mds_core.format.index import MAX_SHARD_SAMPLES
from mds_core.streaming.memory import ORDER_BYTES_PER_SAMPLE, available_memory
from tests.security.conftest import write_ids


def _claiming(out: Path, counts: list[int]) -> Path:
    """A one-sample dataset whose index then claims ``counts`` samples in shards of matching declared size."""
    write_ids(str(out), [1])
    index = json.loads((out / "index.json").read_text())
    entry = index["shards"][0]
    index["shards"] = []
    for count in counts:
        claimed = json.loads(json.dumps(entry))
        claimed["samples"], claimed["raw_data"]["bytes"] = count, 4 * (count + 2)
        index["shards"].append(claimed)
    (out / "index.json").write_text(json.dumps(index))
    return out


def test_plan_checks_the_claims_against_the_files_before_allocating(tmp_path: Path) -> None:
    data = _claiming(tmp_path / "d", [20_000_000])
    assert (data / "index.json").stat().st_size < 320
    tracemalloc.start()
    began = time.perf_counter()
    result = CliRunner().invoke(main, ["plan", str(data), "--batch-size", "8", "--world", "1x1x1", "--json"])
    seconds, peak = time.perf_counter() - began, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.exit_code == 2
    assert "shard 0 claims 20,000,000 samples in 80,000,008 bytes of shard.00000.mds, but the store holds" in (
        result.output
    )
    assert seconds < 2 and peak < 16 << 20, (seconds, peak)  # was 9 s and 960 MiB


def test_an_order_larger_than_the_memory_available_is_refused_before_it_is_computed(tmp_path: Path) -> None:
    """A remote's index claiming more samples than this host can order: refused at the first epoch,
    naming the shard that claims the most, with nothing allocated for it (the OOM killer would act first)."""
    # A quarter more than there is now: what other processes free before the epoch starts must not make it fit.
    available = available_memory()
    assert available is not None, "this host's memory is known (/proc/meminfo)"
    samples = available * 5 // 4 // ORDER_BYTES_PER_SAMPLE + 1
    counts = [MAX_SHARD_SAMPLES] * (samples // MAX_SHARD_SAMPLES) + [samples % MAX_SHARD_SAMPLES]
    remote = _claiming(tmp_path / "remote", [count for count in counts if count])
    dataset = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), batch_size=8, job_root=str(tmp_path))
    tracemalloc.start()
    try:
        with pytest.raises(
            EpochMemoryError, match=rf"epoch 0: the order of its {samples:,} samples needs about"
        ) as err:
            next(iter(dataset))
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert "shard 0 claims the most" in str(err.value)
    assert peak < 64 << 20
