"""A bounded slice of the fuzzing campaign (``make fuzz`` runs the full one), and the kept crashers replayed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.fuzz.harness import load_regression, regressions, run_one, run_range
from tests.fuzz.targets import TARGETS, prepared
from tests.fuzz.targets_verify import check_detected, hashed_datasets, shard_files

# Inputs per target: about 6,600 in all, a few seconds of fuzzing; a different seed from `make fuzz`.
# `dataset` opens, indexes and iterates whole datasets two or three ways per input (~15 ms): fewer inputs;
# so do `cache` and `shardset`, which lay out a cache or a shard set and read it (~10 ms), and `runconfig`,
# which builds three Dagster resources (~3 ms); together the four hostile-input targets add about 7 s.
SLICE = {"index": 1000, "dataset": 120, "shard": 800, "decode": 1000, "compressed": 800, "resume": 1000}
SLICE |= {"manifest": 400, "verify": 800, "bomb": 300, "cache": 100, "shardset": 80, "runconfig": 200}
SLICE_SEED = 1


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _target(name: str, workdir: Path):
    path = workdir / name
    path.mkdir(exist_ok=True)
    return prepared(name, str(path))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_slice(name: str, workdir: Path) -> None:
    stats = run_range(_target(name, workdir), SLICE_SEED, 0, SLICE[name])
    assert not stats.failures, "\n".join(
        f"{key}: input {ex['index']}: {ex['error']}" for key, ex in stats.failures.items()
    )


@pytest.mark.parametrize(("name", "path"), regressions(), ids=[f"{t}/{p.stem}" for t, p in regressions()])
def test_kept_crashers_stay_fixed(name: str, path: Path, workdir: Path) -> None:
    err = run_one(_target(name, workdir), load_regression(path))
    assert err is None, f"{type(err).__name__}: {err}"


def _flip_bytes(workdir: Path, positions: Callable[[int], Iterable[int]], mask: int, run: Any = None) -> int:
    """Each byte at ``positions(size)`` of each shard file of the hashed datasets, changed alone, must be reported."""
    checked = 0
    for root in hashed_datasets(str(workdir)):
        for name in shard_files(root):
            original = Path(root, name).read_bytes()
            for at in positions(len(original)):
                data = bytearray(original)
                data[at] ^= mask
                check_detected(root, name, bytes(data), original, run)
                checked += 1
    return checked


@pytest.mark.slow  # 50 s on two cores; the slice above samples the same checks in make test
def test_every_single_byte_changed_is_reported_by_verify(workdir: Path) -> None:
    """Exhaustive, not sampled: each byte of each shard file (raw, zstd, and raw copies beside zstd), flipped."""
    assert _flip_bytes(workdir / "exhaustive", range, 0xFF) > 2000


def test_mds_verify_command_names_the_corrupted_shard(workdir: Path) -> None:
    from mds_core.cli import main

    def cli(root: str) -> tuple[bool, str]:
        result = CliRunner().invoke(main, ["verify", root])
        assert result.exit_code in (0, 1), result.output
        return result.exit_code == 0, result.output

    # Four places in each of the 9 files: 3 raw shards, 3 zstd zips and their raw copies.
    assert _flip_bytes(workdir / "cli", lambda size: sorted({0, 4, size // 2, size - 1}), 0x01, run=cli) == 36
