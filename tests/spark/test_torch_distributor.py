"""TorchDistributor (pyspark.ml.torch) runs the training function of tests/clients/train_fn.py, which
streams a Volume (the Files API server of testsupport/databricks_files.py) with ``StreamingDataset`` and
``StreamingDataLoader``: an uninterrupted run, a run killed after step k, and its resumption, on the
same and on a different number of processes. Every rank's batches equal the uninterrupted run's, and
each sample is seen once. Local mode here (torchrun on the driver); the distributed mode runs on the
standalone cluster in tests/cluster/test_torch_distributor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.train_fn import read_trace, train, write_training_set

pytestmark = pytest.mark.slow

ROWS, BATCH, STOP = 160, 8, 3
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def volume_dataset(volumes_server) -> str:
    remote = f"{volumes_server.new_root()}/digits"
    write_training_set(remote, ROWS)
    return remote


def _distributed_run(processes: int, volume_dataset: str, volumes_server, work: Path, stop_after: int | None):
    from pyspark.ml.torch.distributor import TorchDistributor

    distributor = TorchDistributor(num_processes=processes, local_mode=True, use_gpu=False)
    host, token = volumes_server.endpoint, volumes_server.token
    paths = [str(work / "cache"), str(work / "trace"), str(work / "ckpt.pt")]  # cache, trace_dir, checkpoint
    return distributor.run(train, host, token, volume_dataset, *paths, stop_after, BATCH)


def _fresh(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    (work / "trace").mkdir(parents=True)
    return work


def test_a_killed_run_resumes_exactly_on_the_same_and_another_process_count(
    classic_spark, volume_dataset, volumes_server, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # torchrun's processes unpickle train by its module
    whole = _fresh(tmp_path, "whole")
    result = _distributed_run(2, volume_dataset, volumes_server, whole, None)
    uninterrupted = read_trace(str(whole / "trace"), 2)
    steps = ROWS // (2 * BATCH)
    assert result["steps"] == steps and all(len(b) == steps for b in uninterrupted.values())
    seen = [i for batches in uninterrupted.values() for batch in batches for i in batch]
    assert sorted(seen) == list(range(ROWS))  # each sample once

    for resumed_on in (2, 1):
        work = _fresh(tmp_path, f"resumed-on-{resumed_on}")
        with pytest.raises(RuntimeError, match="TorchDistributor failed during training"):
            _distributed_run(2, volume_dataset, volumes_server, work, STOP)
        before = read_trace(str(work / "trace"), 2)
        assert before == {r: batches[:STOP] for r, batches in uninterrupted.items()}
        for rank in (0, 1):
            (work / "trace" / f"rank{rank}.jsonl").rename(work / "trace" / f"before{rank}.jsonl")
        _distributed_run(resumed_on, volume_dataset, volumes_server, work, None)
        after = read_trace(str(work / "trace"), resumed_on)
        if resumed_on == 2:
            assert after == {r: batches[STOP:] for r, batches in uninterrupted.items()}
        seen = [i for batches in [*before.values(), *after.values()] for batch in batches for i in batch]
        assert sorted(seen) == list(range(ROWS))  # exactly once across the kill, on either process count
