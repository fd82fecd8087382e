"""Where we promise the reference's behaviour: error classes, warnings, the stream registry, refetching
evicted shards, and the loader's resume options."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mds_core.streaming.dataset
from mds_core import Stream, StreamingDataLoader, StreamingDataset, streams_registry
from mds_core.errors import ConfigurationError, ResumeError, StorageError
from tests.streaming.support import FIXTURES, batch_ids, first_batches, ids, run_python, write_rows

GOLDEN_EMPTY = FIXTURES / "mds-golden" / "datasets" / "empty"


def _write(path: Path, count: int, start: int = 0) -> Path:
    rows = ({"id": i, "pad": b"x" * 100} for i in range(start, start + count))
    return write_rows(path, {"id": "int", "pad": "bytes"}, rows, size_limit=2000)


def test_a_stream_without_samples_raises_what_the_reference_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="contains no samples") as caught:
        StreamingDataset(local=str(GOLDEN_EMPTY), batch_size=4, job_root=str(tmp_path))
    assert isinstance(caught.value, ConfigurationError)


def test_a_missing_remote_file_is_a_file_not_found_error_naming_the_url(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=f"{missing}/index.json") as caught:
        StreamingDataset(remote=str(missing), local=str(tmp_path / "cache"), batch_size=4, job_root=str(tmp_path))
    assert isinstance(caught.value, StorageError)


def test_version_with_streams_is_refused_not_ignored(tmp_path: Path) -> None:
    stream = Stream(local=str(_write(tmp_path / "d", 10)))
    with pytest.raises(ConfigurationError, match="give each Stream its own version="):
        StreamingDataset(streams=[stream], version=3, batch_size=4, job_root=str(tmp_path))


def test_predownload_below_the_batch_size_warns_like_the_reference(tmp_path: Path) -> None:
    local = str(_write(tmp_path / "d", 10))
    with pytest.warns(UserWarning, match=r"predownload < batch_size \(4 < 8\)"):
        StreamingDataset(local=local, batch_size=8, predownload=4, job_root=str(tmp_path))


class TaggedStream(Stream):
    def __init__(self, *, tag: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag = tag


def test_a_registered_stream_subclass_is_built_by_name(tmp_path: Path) -> None:
    streams_registry.register("tagged-for-test", func=TaggedStream)
    local = str(_write(tmp_path / "d", 10))
    config = {"tag": "blue", "repeat": 2}
    ds = StreamingDataset(
        local=local, stream_name="tagged-for-test", stream_config=config, batch_size=4, job_root=str(tmp_path)
    )
    [stream] = ds.streams
    assert type(stream) is TaggedStream and stream.tag == "blue" and stream.local == local
    assert ds.epoch_size == 20  # stream_config reached the Stream: repeat=2
    assert "tagged-for-test" in streams_registry.get_all() and "stream" in streams_registry.get_all()

    @streams_registry.register("decorated-for-test")
    class Decorated(Stream):
        pass

    assert streams_registry.get("decorated-for-test") is Decorated


def test_streams_from_an_installed_package_are_found_by_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "fancy_streams-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fancy-streams\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mds_core.streams]\nfancy = fancy_streams:Fancy\n")
    (site / "fancy_streams.py").write_text("from mds_core import Stream\n\nclass Fancy(Stream):\n    pass\n")
    local = _write(tmp_path / "d", 10)
    script = textwrap.dedent(f"""
        from mds_core import StreamingDataset
        ds = StreamingDataset(local={str(local)!r}, stream_name="fancy", batch_size=4, job_root={str(tmp_path)!r})
        print(type(ds.streams[0]).__module__, type(ds.streams[0]).__name__, len(ds))
    """)
    done = run_python(script, env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fancy_streams", "Fancy", "10"]


def test_a_cached_shard_deleted_mid_epoch_is_fetched_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(mds_core.streaming.dataset, "DELETION_CHECK_SECONDS", 0.0)  # check at every step
    remote = _write(tmp_path / "remote", 400)  # shards of 15 samples
    cache = tmp_path / "cache"
    ds = StreamingDataset(remote=str(remote), local=str(cache), batch_size=10, predownload=10, job_root=str(tmp_path))
    samples = iter(ds)
    first = [int(next(samples)["id"]) for _ in range(35)]  # in the middle of a shard
    for shard in cache.glob("shard.*.mds"):
        shard.unlink()  # evicted by hand (or by another process) while mapped
    rest = ids(samples)
    assert first + rest == list(range(400))
    # Every shard read after the deletion is back in the cache, the open one (mid-shard) included.
    shards = json.loads((remote / "index.json").read_text())["shards"]
    ends = np.cumsum([shard["samples"] for shard in shards])
    in_use = int(np.searchsorted(ends, 35, side="right"))
    assert 0 < 35 - (ends[in_use] - shards[in_use]["samples"]) < shards[in_use]["samples"]
    present = sorted(path.name for path in cache.glob("shard.*.mds"))
    assert present == [shard["raw_data"]["basename"] for shard in shards[in_use:]]


def test_the_loader_can_resume_on_other_data_when_asked(tmp_path: Path) -> None:
    old = StreamingDataset(local=str(_write(tmp_path / "a", 40)), batch_size=4, job_root=str(tmp_path))
    loader = StreamingDataLoader(old, batch_size=4)
    first_batches(loader, 3)
    state = loader.state_dict()
    assert state is not None
    new = StreamingDataset(local=str(_write(tmp_path / "b", 44, start=100)), batch_size=4, job_root=str(tmp_path))
    resumed = StreamingDataLoader(new, batch_size=4)
    with pytest.raises(ResumeError, match="allow_other_data=True"):
        resumed.load_state_dict(state)
    resumed.load_state_dict(state, allow_other_data=True)
    assert sum(batch_ids(resumed), []) == list(range(112, 144))  # the 12 samples already consumed are skipped


def test_later_epochs_keep_a_resumed_states_order_settings(tmp_path: Path) -> None:
    local = str(_write(tmp_path / "d", 60))
    ds = StreamingDataset(local=local, batch_size=4, shuffle=True, job_root=str(tmp_path))
    state = ds.state_dict(0, from_beginning=True)
    state.update(epoch=0, sample_in_epoch=8, num_canonical_nodes=3, shuffle_seed=5)
    ds.load_state_dict(state)
    ids(ds)
    after_resume = ids(ds)  # epoch 1, not resumed
    resumed_state = ds.state_dict(0, True)
    assert [resumed_state[k] for k in ("epoch", "num_canonical_nodes", "shuffle_seed")] == [1, 3, 5]

    def epoch_one(**settings) -> list[int]:
        fresh = StreamingDataset(local=local, batch_size=4, shuffle=True, job_root=str(tmp_path), **settings)
        ids(fresh)
        return ids(fresh)

    # The run continues as a run with those settings from the start would (the reference does so only
    # without DataLoader workers; its workers fall back to the constructor's settings).
    assert after_resume == epoch_one(num_canonical_nodes=3, shuffle_seed=5) != epoch_one()
