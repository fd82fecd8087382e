"""A store that says no: a fifth of the GETs throttled, some stalled; the epoch still reads every sample once.

The loopback S3 (moto) and Files API servers behind a ``FaultProxy`` whose seeded ``RandomFaults`` answer 20% of
the dataset's GETs with ``503 SlowDown`` (no ``Retry-After``: our backoff for S3, the Databricks SDK's 1 s for the
Files API) or ``429`` with ``Retry-After: 1``, and hold 1% for 2 s before answering. The decisions come from one seeded sequence, so the number of GETs an epoch needs is the same every
run; the requests are counted at the proxy.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mds_core import StreamingDataset
from mds_core.errors import StorageError
from mds_core.storage.remote import open_store
from mds_core.storage.throttle import MAX_THROTTLED
from tests.streaming.support import ids, write_ids
from testsupport.fault_proxy import Fault, RandomFaults, fault_proxy_for

SAMPLES = 2000
DATA = r"/(index\.json|shard\.\d+\.mds)$"


@pytest.mark.parametrize("store", ["s3", "volumes"])
def test_an_epoch_on_a_throttling_store_reads_every_sample_once(store: str, request, tmp_path: Path) -> None:
    server = request.getfixturevalue(f"{store}_server")
    remote = f"s3://{server.new_bucket()}/set" if store == "s3" else f"{server.new_root()}/set"
    write_ids(remote, SAMPLES, size_limit=1 << 9)
    shards = len([key for key in open_store(remote).list() if key.endswith(".mds")])
    with fault_proxy_for(server) as proxy:
        proxy.json_refusals = store == "volumes"  # the Files API's own error bodies
        proxy.random = RandomFaults(
            0.21,
            actions={"slowdown": 0, "too_many": 1, "delay": 2},
            weights={"slowdown": 10, "too_many": 10, "delay": 1},
            path=DATA,
            seed=5,
        )
        dataset = StreamingDataset(remote=remote, local=str(tmp_path / "cache"), batch_size=16, shuffle=True)
        assert sorted(ids(dataset)) == list(range(SAMPLES))  # every sample, once
    gets = [path for method, path in proxy.requests if method == "GET" and re.search(DATA, path)]
    injected = proxy.random.injected
    assert injected["slowdown"] >= 5 and injected["too_many"] >= 5 and injected["delay"] >= 1, injected
    assert shards >= 40 and len(set(gets)) == shards + 1  # the shards and the index
    # No storm: each refusal costs exactly one more request (a stall none), so the requests per file are
    # 1 / (1 - the share refused): 1.25 at 20%, within the 1.3.
    assert len(gets) == shards + 1 + injected["slowdown"] + injected["too_many"]


def test_a_file_throttled_past_the_cap_fails_and_says_why(s3_server, fault_proxy, clock) -> None:
    store = open_store(f"s3://{s3_server.new_bucket()}/store", retry=2)
    store.write_bytes("a.bin", b"a")
    throttled = fault_proxy.add(Fault("slowdown", r"a\.bin", times=MAX_THROTTLED))
    assert store.read_bytes("a.bin") == b"a"  # throttled MAX_THROTTLED times, then answered: not an attempt
    assert throttled.hits == MAX_THROTTLED and len(clock.sleeps) == MAX_THROTTLED
    assert all(0 <= wait <= 4.0 for wait in clock.sleeps)  # full jitter under a doubling cap
    fault_proxy.add(Fault("slowdown", r"a\.bin", times=MAX_THROTTLED + 1))
    with pytest.raises(StorageError, match=rf"the store throttled it {MAX_THROTTLED + 1} times in a row \("):
        store.read_bytes("a.bin")
    later = fault_proxy.add(Fault("too_many", r"a\.bin", value=2))
    clock.sleeps.clear()
    assert store.read_bytes("a.bin") == b"a" and later.hits == 1 and clock.sleeps == [2.0]  # as Retry-After asks
