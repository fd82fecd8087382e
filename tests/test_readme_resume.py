"""README.md's "Train, crash, resume" lines, run as written: examples/train_digits.py trains on the published
version (not a newer unpublished one) and its loss falls; the resumed run continues at step 21 with the
exact sample ids, in the same order, that an uninterrupted run trains on.

The commands come from the README itself, so the test breaks when the README drifts. They run in a
scratch checkout (``.venv/bin/python`` is this interpreter, ``examples/`` the project's), with
``MDS_DATA_DIR`` pointing at a scratch data folder. ``make demo`` (Spark and Dagster, minutes) is the one
line not run: a digits-shaped shard set is published where it would publish. A ``sitecustomize`` on
``PYTHONPATH`` records the ids of every batch ``StreamingDataLoader`` hands to the training loop.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.docs.run_page import commands, key
from tests.readme_walk import block_under

ROOT = Path(__file__).resolve().parent.parent
DIGITS_COLUMNS = {"id": "int64", "label": "int32", "pixels": "ndarray:int8:64", "day": "str"}
TRACE_HOOK = textwrap.dedent("""
    import json, os
    if os.environ.get("README_TEST_TRACE"):
        from mds_core.streaming.loader import StreamingDataLoader

        untraced = StreamingDataLoader.__iter__

        def traced(self):
            with open(os.environ["README_TEST_TRACE"], "a") as out:
                for batch in untraced(self):
                    out.write(json.dumps(batch["id"].tolist()) + "\\n")
                    out.flush()
                    yield batch

        StreamingDataLoader.__iter__ = traced
""")


ROWS = 540


def publish_digits(data_dir: Path, rows: int = ROWS) -> None:
    """What `make demo` leaves in ``$MDS_DATA_DIR``: a published digits shard set (synthetic pixels here),
    and after it a newer version that is not published, which training must not pick."""
    from mds_core import MDSWriter
    from mds_core.versions import ShardSet

    rng = np.random.default_rng(0)
    shard_set = ShardSet(str(data_dir / "shard-sets" / "digits"))
    with (
        shard_set.transaction(mode="overwrite") as tx,
        MDSWriter(out=tx.out, columns=DIGITS_COLUMNS, compression="zstd", size_limit="16kb") as writer,
    ):
        for i in range(rows):
            label = i % 10  # pixels that tell the label apart, so the loss falls as with the digits
            writer.write(
                {
                    "id": i,
                    "label": label,
                    "day": "2026-01-01",
                    "pixels": (rng.integers(0, 8, 64) + 8 * (np.arange(64) % 10 == label)).astype(np.int8),
                }
            )
    with shard_set.transaction(mode="append", publish=False) as tx, MDSWriter(out=tx.out, columns=DIGITS_COLUMNS) as w:
        w.write({"id": rows, "label": 0, "day": "2026-01-02", "pixels": np.zeros(64, np.int8)})


class Checkout:
    """A scratch directory laid out like the project's root, where README lines run as written."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = tmp / "checkout"
        (self.cwd / ".venv" / "bin").mkdir(parents=True)
        python = self.cwd / ".venv" / "bin" / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
        (self.cwd / "examples").symlink_to(ROOT / "examples")
        (tmp / "hook").mkdir()
        (tmp / "hook" / "sitecustomize.py").write_text(TRACE_HOOK)
        self.traces = tmp / "traces"
        self.traces.mkdir()
        self.env = {
            **os.environ,
            "MDS_DATA_DIR": str(tmp / "mds-data"),
            "MDS_JOB_ROOT": str(tmp / "jobs"),
            "PYTHONPATH": os.pathsep.join([str(tmp / "hook"), os.environ.get("PYTHONPATH", "")]),
        }
        self.env.pop("MDS_SHARD_STORE", None)
        publish_digits(tmp / "mds-data")

    def run(self, line: str, name: str) -> tuple[list[str], list[list[int]]]:
        """Run one shell line; the lines it printed and the ids of every batch it trained on."""
        trace = self.traces / f"{name}.jsonl"
        env = {**self.env, "README_TEST_TRACE": str(trace)}
        done = subprocess.run(line, shell=True, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
        batches = [json.loads(ids) for ids in trace.read_text().splitlines()] if trace.exists() else []
        return done.stdout.splitlines(), batches


EPOCH_DONE = re.compile(r"epoch (\d) done at step \d+: loss ([\d.]+) over (\d+) samples of version (\d+)")
STOPPED = re.compile(r"stopping after step 20 \(epoch (\d+), sample (\d+)\) as --stop-after-steps asks; .*")


@pytest.mark.slow  # three training processes, 30-40 s: unique, so make test-all
def test_readme_crash_and_resume_continues_as_an_uninterrupted_run(tmp_path: Path) -> None:
    demo, crash, resume = [key(command) for command in commands(block_under("Train, crash, resume", "bash"))]
    assert demo == "make demo"  # replaced by publish_digits: the same shard set, where it publishes
    assert "--stop-after-steps 20" in crash and "--checkpoint data/run.pt" in crash, crash
    uninterrupted = crash.replace(" --stop-after-steps 20", "").replace("data/run.pt", "data/full.pt")
    checkout = Checkout(tmp_path)

    full_out, full_ids = checkout.run(uninterrupted, "full")
    epochs = [match.groups() for line in full_out if (match := EPOCH_DONE.fullmatch(line))]
    losses = [float(loss) for _, loss, _, _ in epochs]
    assert len(full_ids) > 20 and full_out[0].startswith("starting a new run on version 1 of "), full_out
    # Epochs 0-4 of the published version (1), not the newer unpublished one; every sample once an epoch; it learns.
    assert [(epoch, samples, version) for epoch, _, samples, version in epochs] == [
        (str(epoch), str(ROWS), "1") for epoch in range(5)
    ]
    assert losses[-1] < losses[0] * 0.7, losses

    for day in ("first", "again"):  # again: data/run.pt now holds the finished run of the first pass
        crash_out, crash_ids = checkout.run(crash, f"crash-{day}")
        stopped = STOPPED.fullmatch(crash_out[-1])
        assert stopped and len(crash_ids) == 20, crash_out
        resume_out, resume_ids = checkout.run(resume, f"resume-{day}")
        epoch, sample = stopped.groups()  # what the README promises: the next step is 21
        assert resume_out[0] == f"resuming data/run.pt at step 21 (epoch {epoch}, sample {sample}) on version 1"
        assert crash_ids + resume_ids == full_ids  # step 21 onwards: the same samples in the same order
        assert resume_out[1:] == full_out[-len(resume_out) + 1 :]  # the same epochs, steps and losses

    finished_out, finished_ids = checkout.run(resume, "finished")  # nothing left: it says so, trains nothing
    assert finished_ids == [] and len(finished_out) == 1, finished_out
    assert finished_out[0].startswith("data/run.pt holds a finished run of 5 epochs"), finished_out
