"""The crashers the fuzzer found, as explicit cases: each is now a specific MDSError that names the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mds_core.errors import InvalidIndexError, InvalidManifestError, ResumeError, UnsafePathError
from mds_core.format.index import parse_index
from mds_core.format.verify import verify_dataset
from mds_core.streaming.resume import validate_state
from mds_core.versions import ShardSet
from tests.fuzz.seeds import write_rows
from tests.fuzz.targets_state import ResumeTarget
from tests.fuzz.targets_verify import hashed_datasets

STATE = {"epoch": 0, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 1, "initial_physical_nodes": 1}


def test_deeply_nested_index_json() -> None:
    text = b'{"shards": ' + b"[" * 100_000 + b"]" * 100_000 + b', "version": 2}'
    with pytest.raises(InvalidIndexError, match="fuzz/index.json: not valid JSON"):
        parse_index(text, "fuzz/index.json")


def test_a_sample_count_no_shard_can_hold(tmp_path: Path) -> None:
    """Was ``OverflowError: cannot fit 'int' into an index-sized integer`` from ``len(dataset)``."""
    from mds_core import LocalDataset

    root = Path(write_rows(str(tmp_path / "d"), range(8), size_limit=300))
    index = json.loads((root / "index.json").read_bytes())
    index["shards"][-1]["samples"] = 2**63
    (root / "index.json").write_text(json.dumps(index))
    last = len(index["shards"]) - 1
    with pytest.raises(InvalidIndexError, match=rf"index.json: shard {last}: 'samples' is 9,223,372,036,854,775,808"):
        len(LocalDataset(root))


@pytest.mark.parametrize(
    "change",
    [
        {"num_canonical_nodes": 2**32},
        {"initial_physical_nodes": 2**40},
        {"shuffle_seed": -1},
        {"initial_physical_nodes": 0},
    ],
)
def test_state_dict_values_that_would_fail_mid_epoch(change: dict) -> None:
    with pytest.raises(ResumeError, match="state dict"):
        validate_state({**STATE, **change}, "f", epoch_size=10)


def test_state_dict_versions_that_are_not_a_list(tmp_path: Path) -> None:
    target = ResumeTarget()
    target.setup(str(tmp_path))
    state = target.dataset.state_dict(num_samples=0, from_beginning=True)
    with pytest.raises(ResumeError, match="'versions' must be a list"):
        target.dataset.load_state_dict({**state, "versions": 2.5})


@pytest.fixture
def shard_set(tmp_path: Path) -> ShardSet:
    shard_set = ShardSet(str(tmp_path / "set"))
    with shard_set.transaction("overwrite") as tx:
        write_rows(tx.out, range(4), size_limit=300)
    return shard_set


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"{", "00000001.json: not valid JSON"),
        (b"[]", "00000001.json: expected a JSON object"),
        (None, "00000001.json: 'rows' must be int, got '4'"),
        (b'{"version": 1}', r"00000001.json: missing keys \['columns'"),
    ],
)
def test_damaged_manifest(shard_set: ShardSet, tmp_path: Path, text: bytes | None, message: str) -> None:
    path = tmp_path / "set" / "_versions" / "00000001.json"
    if text is None:
        text = json.dumps({**json.loads(path.read_bytes()), "rows": "4"}).encode()
    path.write_bytes(text)
    with pytest.raises(InvalidManifestError, match=message):
        shard_set.versions()
    with pytest.raises(InvalidManifestError, match=message):
        shard_set.version(1)


def test_manifest_naming_an_index_outside_the_root(shard_set: ShardSet, tmp_path: Path) -> None:
    path = tmp_path / "set" / "_versions" / "00000001.json"
    path.write_text(json.dumps({**json.loads(path.read_bytes()), "index": "../../etc/passwd"}))
    with pytest.raises(UnsafePathError, match="00000001.json: 'index'"):
        shard_set.shards(1)


@pytest.mark.parametrize("text", [b"\xff", b'{"version": "1", "fingerprint": "x"}', b"7"])
def test_damaged_published_json(shard_set: ShardSet, tmp_path: Path, text: bytes) -> None:
    (tmp_path / "set" / "_versions" / "published.json").write_bytes(text)
    with pytest.raises(InvalidManifestError, match="published.json"):
        shard_set.published()


def test_verify_checks_the_raw_copy_a_reader_decompressed_beside_the_zip(tmp_path: Path) -> None:
    root = hashed_datasets(str(tmp_path))[1]
    raw = Path(root, "shard.00000.mds")
    data = bytearray(raw.read_bytes())
    data[-1] ^= 1
    raw.write_bytes(bytes(data))
    report = verify_dataset(root)
    assert not report.ok and "shard 0:" in report.problems[0] and "shard.00000.mds: md5 digest" in report.problems[0]
