"""The fuzz targets by name, and a per-process cache of set-up targets (setup writes seed datasets once)."""

from __future__ import annotations

from typing import Any

from tests.fuzz.harness import Target, scratch_dir
from tests.fuzz.targets_bomb import BombTarget
from tests.fuzz.targets_cache import CacheTarget
from tests.fuzz.targets_dataset import DatasetTarget
from tests.fuzz.targets_format import CompressedTarget, DecodeTarget, IndexTarget, ShardTarget
from tests.fuzz.targets_run_config import RunConfigTarget
from tests.fuzz.targets_shardset import ShardSetTarget
from tests.fuzz.targets_state import ManifestTarget, ResumeTarget
from tests.fuzz.targets_verify import VerifyTarget

# In the order a campaign runs them: the parsers of untrusted bytes, then the hostile-input targets.
_CLASSES: list[Any] = [IndexTarget, DatasetTarget, ShardTarget, DecodeTarget, CompressedTarget, ResumeTarget]
_CLASSES += [ManifestTarget, VerifyTarget, BombTarget, CacheTarget, ShardSetTarget, RunConfigTarget]
TARGETS: dict[str, type] = {cls.name: cls for cls in _CLASSES}

_READY: dict[str, Target] = {}


def prepared(name: str, workdir: str | None = None) -> Target:
    """Target ``name``, set up once in this process (in ``workdir``, or a fresh scratch directory)."""
    if name not in _READY:
        target = TARGETS[name]()
        target.setup(workdir or scratch_dir(name))
        _READY[name] = target
    return _READY[name]
