"""An iteration's first block read by byte ranges from uncompressed shards still downloading (issue 38, item 4)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mds_core import StreamingDataset
from mds_core.errors import StorageError
from mds_core.storage.remote import open_store
from mds_core.streaming import ranged
from tests.streaming.support import ids, write_rows
from testsupport.fault_proxy import Fault

SAMPLES = 1200
SHARDS = r"/shard\.\d+\.mds(\.zstd)?$"
SETTINGS: dict[str, Any] = {"batch_size": 64, "shuffle": True, "shuffle_seed": 7, "num_canonical_nodes": 1}


def _write(remote: str, **kwargs: object) -> None:
    """``SAMPLES`` rows of an id and 200 bytes, in shards of about 30 KB (12 of them)."""
    rows = ({"id": i, "pad": bytes([i % 251]) * 200} for i in range(SAMPLES))
    write_rows(remote, {"id": "int", "pad": "bytes"}, rows, size_limit=30_000, **kwargs)


def _remote_dataset(
    s3_server, tmp_path: Path, written: dict[str, Any] | None = None, **options: Any
) -> StreamingDataset:
    """The rows written (with ``written``'s writer options) to a new bucket, read through a new cache."""
    remote = f"s3://{s3_server.new_bucket()}/set"
    _write(remote, **(written or {}))
    return StreamingDataset(
        remote=remote, local=str(tmp_path / "cache"), job_root=str(tmp_path / "j"), **SETTINGS, **options
    )


def _expected(tmp_path: Path) -> list[int]:
    """The epoch's order: the same rows written to a local folder, read from there (no store, no ranges).

    Not from the store: a ranged block whose shards come whole first may still have range requests in flight.
    """
    _write(str(tmp_path / "copy"))
    return ids(StreamingDataset(local=str(tmp_path / "copy"), job_root=str(tmp_path / "j0"), **SETTINGS))


def _ranged_gets(proxy) -> list[tuple[str, str]]:
    shard_gets = [
        (i, path) for i, (method, path) in enumerate(proxy.requests) if method == "GET" and re.search(SHARDS, path)
    ]
    return [(path, proxy.ranges[i]) for i, path in shard_gets if proxy.ranges[i] is not None]


@pytest.fixture
def small_shards_ranged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranged, "BYTES_PER_REQUEST", 0)  # the test's shards are small: read them by ranges anyway


def test_read_ranges_returns_exact_bytes_and_asks_again_only_for_what_was_refused(s3_server, fault_proxy) -> None:
    store = open_store(f"s3://{s3_server.new_bucket()}/store")
    data = bytes(range(256)) * 40
    store.write_bytes("a.bin", data)
    refused = fault_proxy.add(Fault("slowdown", r"a\.bin", times=1))
    spans = [(0, 10), (1000, 1500), (5, 6), (10_000, 10_240)]
    assert store.read_ranges([("a.bin", b, e) for b, e in spans]) == [data[b:e] for b, e in spans]
    requests = zip(fault_proxy.requests, fault_proxy.ranges)
    gets = [header for (method, path), header in requests if method == "GET" and path.endswith("a.bin")]
    assert refused.hits == 1 and len(gets) == len(spans) + 1  # the refused range alone is asked again
    assert sorted(set(gets)) == sorted(f"bytes={b}-{e - 1}" for b, e in spans)


def test_a_store_that_ignores_range_is_refused_with_its_answer_unread(s3_server, fault_proxy) -> None:
    store = open_store(f"s3://{s3_server.new_bucket()}/store", retry=2)
    store.write_bytes("a.bin", b"x" * 5000)
    fault_proxy.add(Fault("ignore_range", r"a\.bin", times=2))
    with pytest.raises(
        StorageError, match=r"range reads of s3://.*/a\.bin and 0 more failed after 2 attempt.*answers 5000 bytes"
    ):
        store.read_ranges([("a.bin", 0, 100)])


def test_the_first_block_comes_by_ranges_while_the_whole_shards_are_held(
    s3_server, fault_proxy, tmp_path: Path, small_shards_ranged: None
) -> None:
    expected = _expected(tmp_path)
    held = fault_proxy.add(Fault("hold", SHARDS, times=10**6, value=60, whole_only=True))
    dataset = _remote_dataset(s3_server, tmp_path)
    samples = iter(dataset)
    first = ids(next(samples) for _ in range(256))  # the first block: no whole shard has come yet
    assert held.hits >= 1 and not held.release.is_set()
    assert first == expected[:256]
    held.release.set()
    assert first + ids(samples) == expected  # then the whole shards: every sample once, in the order
    ranged_gets = _ranged_gets(fault_proxy)
    heads = [path for path, header in ranged_gets if header.startswith("bytes=0-")]
    ends = np.cumsum([shard.samples for shard in dataset.shards])
    spanned = len(np.unique(np.searchsorted(ends, expected[:256], side="right")))
    assert len(heads) == len({path for path, _ in ranged_gets}) == spanned  # one head per shard of the block
    assert len(set(ranged_gets)) == len(heads) + 256  # and one range per sample


def test_a_shard_whose_whole_file_comes_before_its_head_is_asked_for_no_sample_range(
    s3_server, fault_proxy, tmp_path: Path, small_shards_ranged: None
) -> None:
    expected = _expected(tmp_path)
    heads = fault_proxy.add(Fault("hold", SHARDS, times=10**6, value=60, ranged_only=True))
    dataset = _remote_dataset(s3_server, tmp_path)
    assert ids(dataset) == expected  # every sample from the whole files, while the heads are held
    assert heads.hits >= 1 and not heads.release.is_set()
    heads.release.set()
    for thread in threading.enumerate():
        if thread.name == "mds-first-ranges":
            thread.join(timeout=60)
    assert {header.split("-")[0] for _, header in _ranged_gets(fault_proxy)} == {"bytes=0"}  # the heads alone


@pytest.mark.parametrize("setting", [{"compression": "zstd"}, {"hashes": ["sha1"]}], ids=["zstd", "validate_hash"])
def test_compressed_or_hashed_shards_are_never_read_by_ranges(
    s3_server, fault_proxy, tmp_path: Path, small_shards_ranged: None, setting: dict
) -> None:
    checks: dict[str, Any] = {"validate_hash": "sha1"} if "hashes" in setting else {}
    dataset = _remote_dataset(s3_server, tmp_path, setting, **checks)
    assert sorted(ids(dataset)) == list(range(SAMPLES))
    assert _ranged_gets(fault_proxy) == []


def test_failed_range_reads_leave_the_first_block_to_the_whole_shards(
    s3_server, fault_proxy, tmp_path: Path, small_shards_ranged: None
) -> None:
    expected = _expected(tmp_path)
    fault_proxy.add(Fault("ignore_range", SHARDS, times=10**6))  # every range answered with the whole file
    dataset = _remote_dataset(s3_server, tmp_path)
    assert ids(dataset) == expected
    assert {header.split("-")[0] for _, header in _ranged_gets(fault_proxy)} == {"bytes=0"}  # heads only, refused


def test_a_block_over_few_small_shards_waits_for_them_whole(s3_server, fault_proxy, tmp_path: Path) -> None:
    """Under ``BYTES_PER_REQUEST`` per range request (here 9 shards of 30 KB for 265 requests), ranges would cost more."""
    dataset = _remote_dataset(s3_server, tmp_path)
    assert sorted(ids(dataset)) == list(range(SAMPLES))
    assert _ranged_gets(fault_proxy) == []


@given(
    st.integers(1, 40).flatmap(
        lambda count: st.tuples(
            st.just(count),
            st.lists(st.integers(0, count - 1), min_size=1, max_size=count),
            st.lists(st.integers(0, 1000), min_size=count + 1, max_size=count + 1),
            st.none() | st.tuples(st.integers(0, count + 1), st.integers(0, 2**32 - 1)),  # one word damaged
        )
    )
)
def test_a_head_gives_its_spans_or_none_and_never_a_span_outside_the_shard(case: tuple) -> None:
    """A sound head gives each sample's exact span; a damaged one (any word) gives spans inside the file, or none."""
    count, wanted, points, damage = case
    first, size = 4 * (count + 2), 4 * (count + 2) + 1000
    offsets = [first + point for point in sorted(points)]
    offsets[0] = first
    words = [count, *offsets]
    if damage is not None:
        words[damage[0]] = damage[1]
    shard = SimpleNamespace(samples=count, raw_data=SimpleNamespace(bytes=size))
    local_ids = np.array(wanted)
    head = np.array(words[: int(local_ids.max()) + 3], "<u4").tobytes()  # what the ranged read asks for
    spans = ranged.sample_spans(shard, local_ids, head)
    exact = [(offsets[i], offsets[i + 1]) for i in wanted]
    if damage is None or words == [count, *offsets]:
        assert spans == (exact if sum(e - b for b, e in exact) <= size // 2 else None)
    elif spans is not None:
        assert all(first <= begin <= end <= size for begin, end in spans)
        assert sum(end - begin for begin, end in spans) <= size // 2


def test_the_spans_of_a_real_head_are_its_samples(tmp_path: Path) -> None:
    _write(str(tmp_path / "set"))
    data = (tmp_path / "set" / "shard.00000.mds").read_bytes()
    shard = SimpleNamespace(samples=int.from_bytes(data[:4], "little"), raw_data=SimpleNamespace(bytes=len(data)))
    local_ids = np.array([5, 0, 17])
    spans = ranged.sample_spans(shard, local_ids, data[: 4 * (17 + 3)])
    offsets = np.frombuffer(data, "<u4", shard.samples + 1, 4)
    assert spans == [(int(offsets[i]), int(offsets[i + 1])) for i in local_ids]
