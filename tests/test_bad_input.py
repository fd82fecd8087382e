"""Corrupt, truncated and hostile datasets: each gets a specific MDSError that names the file."""

from __future__ import annotations

import contextlib
import json
import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mds_core import LocalDataset, MDSWriter
from mds_core.errors import (
    CorruptShardError,
    DecodeError,
    InvalidIndexError,
    MDSError,
    UnknownEncodingError,
    UnsafePathError,
)
from mds_core.format.index import MAX_SHARD_SAMPLES, MAX_ZIP_BYTES, parse_index
from mds_core.format.shard import MAX_SHARD_BYTES, Schema, ShardReader
from mds_core.format.verify import verify_dataset

COLUMNS = {"id": "int", "text": "str", "vec": "ndarray:int16"}


def _dataset(out: Path, n: int = 6, **kwargs) -> Path:
    import numpy as np

    with MDSWriter(out=str(out), columns=COLUMNS, **kwargs) as writer:
        for i in range(n):
            writer.write({"id": i, "text": "x" * i, "vec": np.arange(i + 1, dtype=np.int16)})
    return out


def _shard(out: Path) -> Path:
    return out / "shard.00000.mds"


def _patch(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


def _edit_index(out: Path, edit) -> None:
    obj = json.loads((out / "index.json").read_text())
    edit(obj)
    (out / "index.json").write_text(json.dumps(obj))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "d")


def test_truncated_shard(dataset: Path) -> None:
    data = _shard(dataset).read_bytes()
    _shard(dataset).write_bytes(data[:-10])
    with pytest.raises(
        CorruptShardError, match=rf"shard.00000.mds: {len(data) - 10} bytes but the index says {len(data)}"
    ):
        LocalDataset(dataset)[0]


BAD_OFFSETS = "sample offsets are out of range or decreasing"


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        (4, 3, BAD_OFFSETS),
        (16, 0xFFFFFF00, BAD_OFFSETS),
        (28, 1 << 31, BAD_OFFSETS),
        (0, 5, "header holds 5 samples but the index says 6"),
    ],
    ids=["first-offset-inside-header", "decreasing-offset", "offset-past-the-end", "sample-count-not-the-index's"],
)
def test_a_bad_header_word(dataset: Path, at: int, value: int, message: str) -> None:
    """The u32 at byte ``at`` of the header (the sample count, then offset ``(at - 4) / 4``) set to ``value``."""
    _patch(_shard(dataset), at, struct.pack("<I", value))
    with pytest.raises(CorruptShardError, match=message):
        LocalDataset(dataset)[0]


def test_sample_count_larger_than_the_file_allows(dataset: Path) -> None:
    size = len(_shard(dataset).read_bytes())
    _patch(_shard(dataset), 0, struct.pack("<I", size))
    # The index is refused first: its own raw_data.bytes cannot hold the header of that many samples.
    _edit_index(dataset, lambda o: o["shards"][0].update(samples=size))
    with pytest.raises(InvalidIndexError, match=rf"index.json: shard 0: 'samples' is {size:,} but the header"):
        LocalDataset(dataset)
    # The reader's own check, for a shard read without an index (the shard header agrees with the count).
    schema = Schema.from_columns(COLUMNS)
    with pytest.raises(CorruptShardError, match=f"{size} bytes is too short for the header of {size} samples"):
        ShardReader.open(str(_shard(dataset)), schema, size)


def test_column_sizes_that_do_not_match_the_sample(dataset: Path) -> None:
    raw = _shard(dataset).read_bytes()
    (begin,) = struct.unpack_from("<I", raw, 4 + 4 * 2)  # sample 2
    _patch(_shard(dataset), begin, struct.pack("<I", 1000))  # its first variable size
    ds = LocalDataset(dataset)
    assert ds[1]["id"] == 1
    with pytest.raises(CorruptShardError, match=r"shard.00000.mds: sample 2: sample is \d+ bytes but its columns"):
        ds[2]
    report = verify_dataset(str(dataset))
    assert not report.ok and "shard 0" in report.problems[0] and "sample 2" in report.problems[0]


def test_garbage_inside_a_value_is_a_decode_error(dataset: Path) -> None:
    raw = _shard(dataset).read_bytes()
    (begin,) = struct.unpack_from("<I", raw, 4 + 4 * 3)
    text_size, _ = struct.unpack_from("<II", raw, begin)
    vec_at = begin + 8 + 8 + text_size  # size table, id, text; then vec's shape byte
    _patch(_shard(dataset), vec_at, bytes([24 << 2]))  # claims 24 dimensions
    with pytest.raises(DecodeError, match=r"sample 3: column 'vec': ndarray value has an invalid shape header"):
        LocalDataset(dataset)[3]


def test_hash_mismatch_is_reported_by_verify(tmp_path: Path) -> None:
    out = _dataset(tmp_path / "d", hashes=["sha256", "xxh64"], size_limit=300)
    assert verify_dataset(str(out)).ok
    shard = out / "shard.00001.mds"
    _patch(shard, len(shard.read_bytes()) - 1, b"\xee")
    report = verify_dataset(str(out))
    assert len(report.problems) == 1
    assert "shard 1:" in report.problems[0] and "shard.00001.mds: sha256 digest" in report.problems[0]


def test_corrupt_compressed_shard(tmp_path: Path) -> None:
    out = _dataset(tmp_path / "d", compression="zstd", hashes=["md5"])
    zipped = out / "shard.00000.mds.zstd"
    _patch(zipped, 10, b"\x00\x00\x00\x00")
    with pytest.raises(CorruptShardError, match="shard.00000.mds.zstd: data does not decompress as zstd"):
        LocalDataset(out)[0]
    assert not list(out.glob("*.tmp")) and not (out / "shard.00000.mds").exists()
    assert "md5 digest" in verify_dataset(str(out)).problems[0]


def test_missing_shard_file(dataset: Path) -> None:
    _shard(dataset).unlink()
    with pytest.raises(CorruptShardError, match="shard.00000.mds: shard file is missing"):
        LocalDataset(dataset)[0]


@pytest.mark.parametrize("basename", ["/etc/passwd", "../../etc/passwd", "sub/../../x.mds"])
def test_path_tricks_never_leave_the_dataset(dataset: Path, basename: str) -> None:
    _edit_index(dataset, lambda o: o["shards"][0]["raw_data"].update(basename=basename))
    with pytest.raises(UnsafePathError, match="must be a relative path inside the dataset"):
        LocalDataset(dataset)


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        ("column_encodings", "int128", UnknownEncodingError, "shard 0: unknown encoding 'int128'"),
        ("column_sizes", 4, InvalidIndexError, r"column 'id' \(int\) has size 8 but the index says 4"),
    ],
)
def test_a_column_the_index_gets_wrong(dataset: Path, key: str, value: object, error: type, message: str) -> None:
    _edit_index(dataset, lambda o: o["shards"][0][key].__setitem__(0, value))
    with pytest.raises(error, match=message):
        LocalDataset(dataset)


@pytest.mark.parametrize("text", ["", "{", '{"shards": [], "version": 1}', '{"shards": {}, "version": 2}'])
def test_broken_index_json(dataset: Path, text: str) -> None:
    (dataset / "index.json").write_text(text)
    with pytest.raises(InvalidIndexError, match="index.json"):
        LocalDataset(dataset)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_corruption_never_escapes_as_another_error(tmp_path_factory, data) -> None:
    """Any byte flipped anywhere: every read returns a sample or raises MDSError, never another exception."""
    out = tmp_path_factory.mktemp("fuzz") / "d"
    _dataset(out, n=5)
    raw = bytearray(_shard(out).read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    _shard(out).write_bytes(bytes(raw))
    try:
        ds = LocalDataset(out)
        for i in range(len(ds)):
            with contextlib.suppress(MDSError):
                ds[i]
    except MDSError:
        pass


ABSURD_COUNTS = st.one_of(st.sampled_from([2**63, 10**30, 2**32, MAX_SHARD_SAMPLES + 1]), st.integers(2**30, 10**40))


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = _dataset(tmp_path_factory.mktemp("absurd") / "d", size_limit=300)
    return out, (out / "index.json").read_text()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=ABSURD_COUNTS)
def test_an_absurd_sample_count_is_an_invalid_index_naming_file_and_shard(two_shards, samples: int) -> None:
    """Counts no shard file can hold (its offsets are u32) were an OverflowError from ``len()``."""
    from mds_core import StreamingDataset

    out, original = two_shards
    (out / "index.json").write_text(original)
    _edit_index(out, lambda o: o["shards"][1].update(samples=samples))
    message = (
        rf"d/index.json: shard 1: 'samples' is {samples:,} but a shard holds at most {MAX_SHARD_SAMPLES:,} samples"
    )
    with pytest.raises(InvalidIndexError, match=message):
        len(LocalDataset(out))
    with pytest.raises(InvalidIndexError, match=message):
        StreamingDataset(local=str(out), job_root=str(out.parent / "jobs"), batch_size=2, telemetry=False)
    cache = out.parent / "cache"
    with pytest.raises(InvalidIndexError) as caught:  # named by the file to repair, never the cache's copy
        StreamingDataset(remote=str(out), local=str(cache), job_root=str(out.parent / "jobs"), batch_size=2)
    assert str(caught.value).startswith(f"{out}/index.json: shard 1: 'samples' is {samples:,} but a shard")
    assert str(cache) not in str(caught.value)


def _entry(samples: int, raw_bytes: int, zip_bytes: int | None = None) -> bytes:
    zip_data = None if zip_bytes is None else {"basename": "s.mds.zstd", "bytes": zip_bytes, "hashes": {}}
    shard = {
        "column_encodings": ["int"],
        "column_names": ["id"],
        "column_sizes": [8],
        "compression": None if zip_bytes is None else "zstd",
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": "s.mds", "bytes": raw_bytes, "hashes": {}},
        "samples": samples,
        "size_limit": None,
        "version": 2,
        "zip_data": zip_data,
    }
    return json.dumps({"shards": [shard], "version": 2}).encode()


def test_the_bounds_are_exactly_what_the_format_allows() -> None:
    """A shard is ``u32 N``, ``u32 offsets[N + 1]``, ...: at least 4 (N + 2) bytes, at most 2**32 - 1."""
    assert MAX_SHARD_SAMPLES == 2**30 - 3 and 4 * (MAX_SHARD_SAMPLES + 2) <= MAX_SHARD_BYTES < 4 * (
        MAX_SHARD_SAMPLES + 3
    )
    (largest,) = parse_index(_entry(MAX_SHARD_SAMPLES, MAX_SHARD_BYTES, MAX_ZIP_BYTES))
    assert largest.samples == MAX_SHARD_SAMPLES and largest.zip_data and largest.zip_data.bytes == MAX_ZIP_BYTES
    assert parse_index(_entry(10, 48))[0].samples == 10  # the header alone: 4 * (10 + 2) bytes
    with pytest.raises(
        InvalidIndexError, match=r"x.json: shard 0: 'samples' is 10 but the header of 10 samples takes 48"
    ):
        parse_index(_entry(10, 47), "x.json")
    with pytest.raises(InvalidIndexError, match=rf"shard 0 raw_data: 'bytes' is {MAX_SHARD_BYTES + 1:,}, more than"):
        parse_index(_entry(10, MAX_SHARD_BYTES + 1), "x.json")
    with pytest.raises(InvalidIndexError, match=r"shard 0 zip_data: 'bytes' is 10,000,000,000, more than a shard"):
        parse_index(_entry(10, 100, 10**10), "x.json")


@settings(max_examples=200, deadline=None)
@given(samples=st.integers(0, 10**20), raw_bytes=st.integers(0, 10**20), zip_bytes=st.none() | st.integers(0, 10**20))
def test_whatever_counts_the_index_holds_parsing_accepts_exactly_those_in_bounds(
    samples: int, raw_bytes: int, zip_bytes: int | None
) -> None:
    fits = 4 * (samples + 2) <= raw_bytes <= MAX_SHARD_BYTES and (zip_bytes or 0) <= MAX_ZIP_BYTES
    if not fits:
        with pytest.raises(InvalidIndexError, match=r"^index.json: shard 0.*(more than|at most)"):
            parse_index(_entry(samples, raw_bytes, zip_bytes))
        return
    (shard,) = parse_index(_entry(samples, raw_bytes, zip_bytes))
    assert shard.samples == samples <= MAX_SHARD_SAMPLES and shard.raw_data.bytes == raw_bytes


# In a fresh interpreter whose address space is capped, as a host without that much memory would be.
_ORDER_SCRIPT = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
from mds_core import StreamingDataset
from mds_core.errors import EpochMemoryError
dataset = StreamingDataset(local=sys.argv[1], job_root=sys.argv[2], batch_size=2, telemetry=False)
print(len(dataset))
try:
    next(iter(dataset))
except EpochMemoryError as err:
    print(f"{type(err).__name__}: {err}")
"""


def test_an_index_claiming_more_samples_than_its_files_hold_fails_to_order_with_an_mds_error(tmp_path: Path) -> None:
    """Counts within the format's bounds that agree with a false file size: the order is computed first."""
    import subprocess
    import sys

    out = _dataset(tmp_path / "d")
    _edit_index(out, lambda o: o["shards"][0].update(samples=MAX_SHARD_SAMPLES))
    _edit_index(out, lambda o: o["shards"][0]["raw_data"].update(bytes=MAX_SHARD_BYTES))
    result = subprocess.run(
        [sys.executable, "-c", _ORDER_SCRIPT, str(out), str(tmp_path / "jobs")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    # Refused before the order is computed: it would need 48 GiB, and the address space is capped at 3.
    count, refusal = result.stdout.splitlines()
    assert count == f"{MAX_SHARD_SAMPLES}"
    assert re.fullmatch(
        rf"EpochMemoryError: epoch 0: the order of its {MAX_SHARD_SAMPLES:,} samples needs about 48\.0 GiB, more "
        rf"than the [0-2]\.\d GiB of memory available; {re.escape(str(out))}/index\.json: shard 0 claims the most "
        rf"\({MAX_SHARD_SAMPLES:,} samples\)\. If the data is not that large, that index is damaged or hostile: "
        r"`mds verify` checks it against the shard files",
        refusal,
    ), refusal
