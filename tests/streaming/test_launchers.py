"""Launchers other than torchrun, on 2 CPU ranks over gloo: ``torch.multiprocessing.spawn`` with
``init_process_group`` (no variables at all) and ``accelerate launch`` (tests/clients/launch_train.py),
and Composer's ``Trainer`` under Composer's launcher, in its own client environment
(tests/clients/composer_train.py, .cache/clients/composer). Each epoch covers every sample exactly once,
and a run stopped at step k resumes with exactly the batches the uninterrupted run had after k.
Lightning's launcher is in test_lightning.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.streaming.support import write_rows

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "clients" / "launch_train.py"
ROWS, STOP = 160, 4
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _command(launcher: str) -> list[str]:
    if launcher == "composer":
        composer = ROOT / ".cache" / "clients" / "composer" / "bin" / "composer"
        assert composer.exists(), f"{composer} is missing: run `make client-envs` (tests/clients/setup_envs.sh)"
        return [str(composer), "-n", "2", str(ROOT / "tests" / "clients" / "composer_train.py")]
    if launcher == "spawn":
        return [sys.executable, str(SCRIPT), "spawn"]
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable))
    assert accelerate is not None, "accelerate is a dev dependency: make install"
    # --multi_gpu is accelerate's torchrun launcher (its --cpu alone starts one process, or needs mpirun);
    # the script's Accelerator(cpu=True) then joins a gloo group on the CPU.
    launch = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    return [accelerate, "launch", *launch, "--dynamo_backend", "no", str(SCRIPT), "accelerate"]


def _train(launcher: str, dataset: Path, work: Path, *flags: str) -> dict[int, list[list[int]]]:
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [*_command(launcher), str(dataset), str(work), *flags], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    traces = {r: work / "trace" / f"rank{r}.jsonl" for r in (0, 1)}
    batches = {r: [json.loads(line) for line in path.read_text().splitlines()] for r, path in traces.items()}
    for path in traces.values():
        path.unlink()
    return batches


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = ({"id": i} for i in range(ROWS))
    return write_rows(tmp_path_factory.mktemp("launchers") / "ds", {"id": "int64"}, rows, size_limit=1 << 9)


@pytest.mark.parametrize("launcher", ["spawn", "accelerate", "composer"])
def test_each_rank_reads_its_part_and_a_stopped_run_resumes_exactly(
    launcher: str, dataset: Path, tmp_path: Path
) -> None:
    whole = _train(launcher, dataset, tmp_path / "whole")
    seen = [i for batches in whole.values() for batch in batches for i in batch]
    assert sorted(seen) == list(range(ROWS))  # before: each rank read all 160, every sample twice
    assert len(whole[0]) == len(whole[1]) == ROWS // 16

    work = tmp_path / "stopped"
    assert _train(launcher, dataset, work, "--stop-at", str(STOP)) == {r: b[:STOP] for r, b in whole.items()}
    assert _train(launcher, dataset, work, "--resume") == {r: b[STOP:] for r, b in whole.items()}
