"""Fuzz targets for the small JSON records around the data: resume state dicts and shard-set manifests."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path, PurePosixPath
from typing import Any

from mds_core.errors import MDSError
from mds_core.order import generate_work
from mds_core.streaming.epochs import CanonicalEpochs
from mds_core.streaming.world import detect_world
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_bytes, mutate_json, mutate_record
from tests.fuzz.seeds import write_rows


class ResumeTarget:
    """State dicts -> ``StreamingDataset.load_state_dict``; an accepted state must then give its epoch's order.

    ``validate_state`` promises that a bad checkpoint fails at load, not mid-epoch: so an accepted
    state whose order cannot be computed (any error at all) is a failure too.
    """

    name = "resume"

    def setup(self, workdir: str) -> None:
        from mds_core import StreamingDataset

        data = write_rows(os.path.join(workdir, "data"), range(24), size_limit=300, exist_ok=True)
        self.dataset = StreamingDataset(
            local=data, batch_size=2, shuffle=True, job_root=os.path.join(workdir, "job"), telemetry=False
        )
        self.world = detect_world()
        base = self.dataset.state_dict(num_samples=5, from_beginning=True)
        self.seeds = [
            base,
            {**base, "epoch": -1, "sample_in_epoch": 0},
            {**base, "fingerprint": None},
            {**base, "epoch": 3, "sample_in_epoch": self.dataset.epoch_size},
        ]

    def generate(self, rng: random.Random) -> dict[str, Any]:
        seed = rng.choice(self.seeds)
        if rng.random() < 0.1:  # the state as a checkpoint file would hold it, bytes mutated, if it still parses
            try:
                return {"state": json.loads(mutate_bytes(rng, json.dumps(seed).encode()))}
            except ValueError:
                pass
        return {"state": mutate_json(rng, seed)}

    def check(self, case: dict[str, Any]) -> None:
        state = case["state"]
        self.dataset.load_state_dict(state)
        epochs = self.dataset._epochs
        assert isinstance(epochs, CanonicalEpochs)  # the dataset has no schedule
        spec = epochs._spec_for(state, self.world)
        epoch, position = max(state["epoch"], 0), state["sample_in_epoch"] if state["epoch"] >= 0 else 0
        try:
            generate_work(spec, 1, 1, 1, epoch, position)
        except MDSError as err:
            raise PropertyFailure("accepted state fails mid-epoch", f"{type(err).__name__}: {err}") from err


class ManifestTarget:
    """A shard set's ``_versions/*.json``, ``published.json`` and version indexes -> every ``ShardSet`` reader."""

    name = "manifest"

    def setup(self, workdir: str) -> None:
        from mds_core.versions import ShardSet

        self.root = os.path.join(workdir, "set")
        self.shard_set = ShardSet(self.root, retry=1)
        if not os.path.exists(os.path.join(self.root, "_versions", "published.json")):
            for mode, rows in (("overwrite", 6), ("append", 4)):
                with self.shard_set.transaction(mode) as tx:  # the append is a partition: its manifest lists it
                    write_rows(
                        tx.out if mode == "overwrite" else tx.partition_out("d1"), range(rows), size_limit=1 << 20
                    )
        names = [
            os.path.relpath(os.path.join(d, f), self.root)
            for d, _, fs in os.walk(os.path.join(self.root, "_versions"))
            for f in fs
        ] + ["index.json"]
        self.files = {name: Path(self.root, name).read_bytes() for name in sorted(names)}

    def generate(self, rng: random.Random) -> dict[str, Any]:
        name = rng.choice(sorted(self.files))
        return {"file": name, "data": mutate_record(rng, self.files[name])}

    def check(self, case: dict[str, Any]) -> None:
        path = Path(self.root, case["file"])
        path.write_bytes(case["data"])
        try:
            self._read_everything()
        finally:
            path.write_bytes(self.files[case["file"]])

    def _read_everything(self) -> None:
        shard_set = self.shard_set
        for info in shard_set.versions():
            # What a manifest names is later read, listed or deleted: it must be a path inside the root.
            if (
                not isinstance(info.version, int)
                or not isinstance(info.index, str)
                or PurePosixPath(info.index).is_absolute()
                or ".." in PurePosixPath(info.index).parts
            ):
                raise PropertyFailure(
                    "manifest accepted with a bad field", f"version {info.version!r} index {info.index!r}"
                )
        shard_set.latest()
        shard_set.published()
        for number in (1, 2):
            shard_set.version(number)
            shard_set.shards(number)
        shard_set.diff(1, 2)
        shard_set.vacuum(dry_run=True)
