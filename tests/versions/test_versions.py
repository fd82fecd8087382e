"""Versioned shard sets on a local root and on the loopback S3 server."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from mds_core import StreamingDataset, cli
from mds_core.errors import ConfigurationError, ResumeError, VersionConflictError
from mds_core.storage.first_byte import DEADLINE_ENV
from mds_core.versions import ShardSet
from tests.versions.conftest import COLUMNS, commit, read_ids, write_day

ROOT = Path(__file__).resolve().parents[2]
REF_PYTHON = ROOT / "benchmarks" / ".venv" / "bin" / "python"


def _files(shard_set: ShardSet, prefix: str = "") -> set[str]:
    return set(shard_set.store.list(prefix))


def test_commit_append_list_show_diff_and_checkout(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    assert shard_set.versions() == [] and shard_set.published() is None
    v1 = commit(shard_set, "overwrite", "2026-11-01", range(100))
    before = _files(shard_set, "data")
    v2 = commit(shard_set, "append", "2026-11-02", range(100, 150))
    written = _files(shard_set, "data") - before
    assert written and all(name.startswith(f"data/{v2.transaction}/") for name in written)  # only the new day
    assert [v.version for v in shard_set.versions()] == [1, 2] and shard_set.published() == 2
    assert (v1.rows, v2.rows, v2.parent, v2.new_shards) == (100, 150, 1, len(written) - 1)  # minus its index.json
    assert shard_set.version(2).lineage == {"day": "2026-11-02"} and v2.columns == COLUMNS
    diff = shard_set.diff(1, 2)
    assert (diff.added_rows, diff.removed_rows, diff.removed_shards) == (50, 0, [])
    assert len(diff.added_shards) == v2.new_shards
    assert read_ids(root, tmp_path, version=1) == list(range(100))
    assert read_ids(root, tmp_path, version=2) == list(range(150))
    assert read_ids(root, tmp_path) == list(range(150))  # the root's index.json is the published version
    assert shard_set.store.read_bytes("index.json") == shard_set.index_bytes(2)
    v3 = commit(shard_set, "overwrite", "2026-11-03", range(500, 510))
    assert shard_set.diff(2, 3).removed_rows == 150 and read_ids(root, tmp_path, version=3) == list(range(500, 510))
    with pytest.raises(ConfigurationError, match=r"no version 9; versions here: \[1, 2, 3\]"):
        read_ids(root, tmp_path, version=9)
    assert v3.fingerprint != v2.fingerprint


def test_two_writers_from_the_same_version_exactly_one_wins(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "d1", range(10))
    first, second = shard_set.transaction("append"), shard_set.transaction("append")
    write_day(first.out, "d2", range(10, 20))
    write_day(second.out, "d3", range(20, 30))
    with first:
        pass
    with pytest.raises(VersionConflictError, match="version 2 was committed by another writer first"), second:
        pass
    assert [v.version for v in shard_set.versions()] == [1, 2] and read_ids(root, tmp_path) == list(range(20))
    again = shard_set.commit(second.id, "append")  # nothing was lost: its shards commit on top of the winner
    assert again.version == 3 and read_ids(root, tmp_path, version=3) == list(range(30))


def test_vacuum_keeps_what_retained_versions_need(root: str, tmp_path: Path) -> None:
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "d1", range(40))
    commit(shard_set, "append", "d2", range(40, 80))
    v3 = commit(shard_set, "overwrite", "d3", range(80, 90))
    v4 = commit(shard_set, "append", "d4", range(90, 100))
    report = shard_set.vacuum(keep_last=2)
    assert report.kept_versions == [3, 4] and report.removed_versions == [1, 2]
    assert [v.version for v in shard_set.versions()] == [3, 4]
    left = {name.split("/")[1] for name in _files(shard_set, "data")}
    assert left == {v3.transaction, v4.transaction}  # d1 and d2's shards are gone, d3's stay (v4 needs them)
    assert read_ids(root, tmp_path, version=4) == list(range(80, 100))
    assert shard_set.vacuum(keep_last=2).removed_files == []  # nothing more to do


def test_resuming_on_another_version_is_refused_unless_allowed(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "d1", range(40))
    commit(shard_set, "append", "d2", range(40, 80))
    one = StreamingDataset(
        remote=root, local=str(tmp_path / "c1"), version=1, batch_size=4, job_root=str(tmp_path / "jobs")
    )
    state = one.state_dict(8, from_beginning=True)
    assert state["versions"] == [1]
    two = StreamingDataset(
        remote=root, local=str(tmp_path / "c2"), version=2, batch_size=4, job_root=str(tmp_path / "jobs")
    )
    with pytest.raises(ResumeError, match=r"taken on shard-set version\(s\) \[1\], but this dataset reads \[2\]"):
        two.load_state_dict(state)
    two.load_state_dict(state, allow_other_data=True)


def test_the_cli(tmp_path: Path) -> None:
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "d1", range(40))
    commit(shard_set, "append", "d2", range(40, 60))
    runner = CliRunner()
    listed = runner.invoke(cli.main, ["versions", "list", root, "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output)["published"] == 2
    assert [v["rows"] for v in json.loads(listed.output)["versions"]] == [40, 60]
    assert "* " in runner.invoke(cli.main, ["versions", "list", root]).output
    shown = json.loads(runner.invoke(cli.main, ["versions", "show", root, "2", "--json"]).output)
    assert shown["parent"] == 1 and shown["lineage"] == {"day": "d2"}
    diff = json.loads(runner.invoke(cli.main, ["versions", "diff", root, "1", "2", "--json"]).output)
    assert diff["added_rows"] == 20 and diff["removed_rows"] == 0
    vacuum = runner.invoke(cli.main, ["versions", "vacuum", root, "--keep-last", "1", "--dry-run"])
    assert vacuum.exit_code == 0 and "would delete" in vacuum.output and len(shard_set.versions()) == 2
    missing = runner.invoke(cli.main, ["versions", "show", root, "7"])
    assert missing.exit_code == 2 and "no version 7" in missing.output


def test_list_and_show_print_for_people_not_python_reprs(tmp_path: Path) -> None:
    """Issue 40, item 17: no ``None``, no dict reprs; long values cut short; ``--json`` unchanged."""
    root = str(tmp_path / "set")
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "d1", range(40))
    days = [f"2026-01-{day:02}" for day in range(1, 31)]
    with shard_set.transaction("append", lineage={"days": days, "source": {"table": "raw", "rows": 20}}) as tx:
        write_day(tx.out, "d2", range(40, 60))
    runner = CliRunner()
    listed = runner.invoke(cli.main, ["versions", "list", root]).output.splitlines()
    assert listed[0].endswith("parent none") and listed[1].endswith("parent 1") and listed[1].startswith("*")
    one = runner.invoke(cli.main, ["versions", "show", root, "1"])
    assert one.exit_code == 0 and "None" not in one.output and "{" not in one.output
    lines = one.output.splitlines()
    assert lines[1] == "parent        none"
    assert lines[lines.index("columns") + 1 :][:2] == ["  day: str", "  id: int"]
    at = lines.index("writer")
    assert lines[at + 1 : at + 4] == ["  compression: none", "  hashes: none", "  size_limit: 1024"]
    assert lines[-2:] == ["lineage", "  day: d1"]
    raw = shard_set.version(1).raw_bytes
    assert f"raw_bytes     {raw:,} (" in one.output
    two = runner.invoke(cli.main, ["versions", "show", root, "2"]).output.splitlines()
    shown_days = ", ".join(days)
    assert two[-2] == f"  days: {shown_days[:97]}... ({len(shown_days):,} characters; --json prints all)"
    assert two[-1] == '  source: {"table": "raw", "rows": 20}'
    assert max(map(len, two)) <= 160
    as_json = json.loads(runner.invoke(cli.main, ["versions", "show", root, "2", "--json"]).output)
    assert as_json["lineage"] == {"days": days, "source": {"table": "raw", "rows": 20}} and as_json["parent"] == 1


@pytest.mark.skipif(not REF_PYTHON.exists(), reason="needs the reference: run `make interop`")
def test_the_reference_reads_any_version(tmp_path: Path) -> None:
    root = tmp_path / "set"
    shard_set = ShardSet(str(root))
    commit(shard_set, "overwrite", "d1", range(30))
    commit(shard_set, "append", "d2", range(30, 45))
    for number, expected in ((1, list(range(30))), (2, list(range(45)))):
        index = tmp_path / f"index-{number}.json"
        index.write_bytes(shard_set.index_bytes(number))
        result = subprocess.run(
            [str(REF_PYTHON), str(ROOT / "tests/interop/ref_dump.py"), str(root), "--index", str(index)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        ids = [int(json.loads(line)["id"]["v"]) for line in result.stdout.splitlines()]
        assert ids == expected


def test_a_long_lived_shard_set_sees_what_other_writers_did(root: str, tmp_path: Path) -> None:
    watcher = ShardSet(root)  # as a Dagster resource or a training job would hold it
    commit(watcher, "overwrite", "d1", range(10))
    assert [v.version for v in watcher.versions()] == [1]
    other = ShardSet(root)
    commit(other, "append", "d2", range(10, 20))
    assert [v.version for v in watcher.versions()] == [1, 2]  # no stale listing
    other.vacuum(keep_last=1, grace=dt.timedelta(0))
    assert [v.version for v in watcher.versions()] == [2] and watcher.published() == 2


def _s3_clients_built(monkeypatch) -> list[object]:
    """From now on, every S3 client built in this process (an ``s3fs.S3FileSystem``, an ``S3Reads``), in a list that grows."""
    import s3fs

    from mds_core.storage.s3_reads import S3Reads

    made: list[object] = []
    for kind in (s3fs.S3FileSystem, S3Reads):

        def counted(client: object, *args: object, build=kind.__init__, **kwargs: object) -> None:
            made.append(client)
            build(client, *args, **kwargs)

        monkeypatch.setattr(kind, "__init__", counted)
    return made


def test_a_pinned_versions_first_start_uses_one_client_and_sends_no_head(
    s3_server, tmp_path: Path, monkeypatch
) -> None:
    """The manifest, the index and the shards: one GET each, through the stream's one S3 client, botocore's alone."""
    monkeypatch.setenv(DEADLINE_ENV, "off")  # a loaded machine's late loopback answer would be asked for again
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/set"
    commit(ShardSet(root), "overwrite", "2026-11-01", range(40))
    made = _s3_clients_built(monkeypatch)
    since = s3_server.log_position()
    dataset = StreamingDataset(remote=root, local=str(tmp_path / "cache"), version=1, batch_size=4)
    assert sorted(int(sample["id"]) for sample in dataset) == list(range(40))
    requests = [(r.method, r.path.split("/set/", 1)[1]) for r in s3_server.requests(since) if f"/{bucket}/" in r.path]
    shards = [path for _, path in requests if path.endswith(".mds")]
    assert requests[:2] == [("GET", "_versions/00000001.json"), ("GET", requests[1][1])], requests
    assert requests[1][1].endswith("index.json") and shards and len(requests) == 2 + len(shards), requests
    assert {method for method, _ in requests} == {"GET"} and [type(client).__name__ for client in made] == ["S3Reads"]


def test_a_pinned_version_read_from_its_cache_builds_no_client(s3_server, tmp_path: Path, monkeypatch) -> None:
    """Nothing to ask the store: no S3 client is built (importing and building one is most of a resume's start)."""
    root = f"s3://{s3_server.new_bucket()}/set"
    commit(ShardSet(root), "overwrite", "2026-11-01", range(40))

    def read() -> list[int]:
        dataset = StreamingDataset(remote=root, local=str(tmp_path / "cache"), version=1, batch_size=4)
        return sorted(int(sample["id"]) for sample in dataset)

    assert read() == list(range(40))  # the index and every shard cached
    made = _s3_clients_built(monkeypatch)
    assert read() == list(range(40)) and made == []
    min((tmp_path / "cache").rglob("*.mds")).unlink()  # a shard to fetch: the client is built then
    assert read() == list(range(40)) and len(made) == 1


def test_a_pinned_version_reads_its_cached_index_without_a_request(s3_server, tmp_path: Path) -> None:
    """A committed version never changes: once its index is cached, a new dataset (a resumed job)
    asks the store for nothing, while an unpinned read always fetches the index again."""
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/set"
    shard_set = ShardSet(root)
    commit(shard_set, "overwrite", "2026-11-01", range(40))
    commit(shard_set, "append", "2026-11-02", range(40, 60))
    cache = tmp_path / "cache"

    def read(version: int | None) -> tuple[list[int], list]:
        since = s3_server.log_position()
        dataset = StreamingDataset(
            remote=root, local=str(cache), version=version, batch_size=4, job_root=str(tmp_path / f"jobs-{since}")
        )
        ids = [int(sample["id"]) for sample in dataset]
        return ids, [r for r in s3_server.requests(since) if r.path.lstrip("/").split("/")[0] == bucket]

    first_ids, first_requests = read(1)
    assert first_ids == list(range(40)) and first_requests  # the manifest, the index and the shards
    again_ids, again_requests = read(1)
    assert again_ids == list(range(40)) and again_requests == []
    # Another version into the same local directory: its own index, fetched (not version 1's).
    assert read(2)[0] == list(range(60))
    assert read(1)[0] == list(range(40))
    # An index left there by an unpinned read is not taken for a version's.
    ids, requests = read(None)
    assert ids == list(range(60)) and any(r.path.endswith("/set/index.json") for r in requests)
    ids, requests = read(1)
    assert ids == list(range(40)) and any(r.path.endswith(".index.json") for r in requests)
    # A damaged cached index (a crash mid-copy) no longer matches its record: fetched again.
    (cache / "index.json").write_bytes((cache / "index.json").read_bytes()[:-5])
    ids, requests = read(1)
    assert ids == list(range(40)) and any(r.path.endswith(".index.json") for r in requests)


def _index_cached_by_another_rank(s3_server, tmp_path: Path) -> StreamingDataset:
    """A pinned version of 40 samples whose index (not its shards) another dataset cached: this one has no client."""
    root = f"s3://{s3_server.new_bucket()}/set"
    commit(ShardSet(root), "overwrite", "2026-11-01", range(40))
    cache = str(tmp_path / "cache")
    StreamingDataset(remote=root, local=cache, version=1, batch_size=4)  # another rank's: caches the index
    return StreamingDataset(remote=root, local=cache, version=1, batch_size=4)


def test_loader_workers_take_over_the_client_their_rank_opens_before_the_fork(s3_server, tmp_path: Path) -> None:
    """A rank that found its pinned index cached has no client. With shards still to fetch it opens one
    before its DataLoader workers fork, and each worker makes its own from that client's session
    instead of building a session itself (most of what a client costs)."""
    from mds_core import StreamingDataLoader

    dataset = _index_cached_by_another_rank(s3_server, tmp_path)
    store = dataset.streams[0].store()
    assert store._reader is None and store._fs is None  # this rank has asked the store for nothing
    reports = tmp_path / "workers"
    reports.mkdir()

    def report(worker_id: int) -> None:
        inherited = store._reader  # this worker's copy of the rank's store, before it opens its own client
        own = store.reader
        taken_over = inherited is not None and own is not inherited and own.session is inherited.session
        (reports / f"{worker_id}.json").write_text(json.dumps(taken_over))

    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, worker_init_fn=report)
    assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(40))
    assert [json.loads((reports / f"{worker}.json").read_text()) for worker in range(2)] == [True, True]


def test_a_client_the_rank_cannot_open_leaves_the_workers_to_open_theirs(
    s3_server, tmp_path: Path, monkeypatch
) -> None:
    """Opening the client before the fork is a head start only: where it fails, the epoch reads as before."""
    import botocore.session

    from mds_core import StreamingDataLoader

    dataset = _index_cached_by_another_rank(s3_server, tmp_path)
    tried, rank, create_client = [], os.getpid(), botocore.session.Session.create_client

    def refuse(self: object, *args: object, **kwargs: object) -> object:
        if os.getpid() != rank:  # a worker: builds its own
            return create_client(self, *args, **kwargs)
        tried.append(True)
        raise RuntimeError("no client before the fork")

    monkeypatch.setattr(botocore.session.Session, "create_client", refuse)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(40))
    assert tried == [True]
