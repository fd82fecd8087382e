"""Bugs the soak found, each pinned by a small test of its own."""

from __future__ import annotations

from pathlib import Path

from mds_core import MDSWriter, Stream, StreamingDataset
from mds_core.versions import ShardSet
from testsupport.fault_proxy import Fault


def test_resolving_a_pinned_version_gets_the_streams_download_retry(s3_server, fault_proxy, tmp_path: Path) -> None:
    # Stream(version=N) read the version's manifest with ShardSet's own 3 attempts, whatever
    # download_retry said: at a steady fault rate p, p**3 of the runs failed inside the budget.
    root = f"s3://{s3_server.new_bucket()}/set"
    with ShardSet(root).transaction("overwrite") as tx:
        with MDSWriter(out=tx.out, columns={"id": "int"}, size_limit=1024) as writer:
            for i in range(100):
                writer.write({"id": i})
    fault = fault_proxy.add(Fault("status", path=r"_versions/00000001\.json$", value=503, times=3))
    dataset = StreamingDataset(
        streams=[Stream(remote=root, local=str(tmp_path / "cache"), version=1)],
        download_retry=4,
        batch_size=4,
        job_root=str(tmp_path / "jobs"),
    )
    assert sorted(int(sample["id"]) for sample in dataset) == list(range(100))
    assert fault.hits == 3
