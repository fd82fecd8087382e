"""Unity Catalog volumes (``dbfs:/Volumes/...``): what the matrix of test_remote.py and test_stores.py does not cover.

Against the Files API server of testsupport/databricks_files.py on 127.0.0.1, through the real Databricks
SDK: listings that span pages, the SDK's own retries switched off, credentials errors, refused
paths, and ``vacuum`` reading the files' modification times.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mds_core import MDSWriter, StreamingDataset
from mds_core.errors import ConfigurationError, MDSError, StorageError
from mds_core.storage.remote import open_store
from mds_core.storage.volumes import volume_path
from mds_core.versions import ShardSet
from testsupport.fault_proxy import fault_proxy_for


@pytest.fixture
def proxy(volumes_server):
    with fault_proxy_for(volumes_server) as proxy:
        yield proxy


def test_listings_follow_every_page(volumes_server) -> None:
    store = open_store(f"{volumes_server.new_root()}/set")
    names = [f"d{d}/f{f:02d}" for d in range(4) for f in range(7)] + ["top.json"]
    for name in names:
        store.write_bytes(name, name.encode())
    before = len(volumes_server.requests)
    assert store.list() == sorted(names) and store.list("d2") == [f"d2/f{f:02d}" for f in range(7)]
    pages = [t for m, t in volumes_server.requests[before:] if "/fs/directories/" in t and "page_token=" in t]
    assert len(pages) >= 2 * 4  # 3 entries a page: 7 files take 3 pages, the first without a token
    store.delete_tree("d1")
    assert store.list() == sorted(n for n in names if not n.startswith("d1/"))
    assert store.list("missing") == [] and not store.exists("missing/x")


def test_uploads_create_missing_directories_where_the_service_does_not(volumes_server, monkeypatch) -> None:
    monkeypatch.setattr(volumes_server, "upload_creates_parents", False)
    store = open_store(f"{volumes_server.new_root()}/store")
    store.write_bytes("a/b/c.bin", b"c")
    assert store.write_if_absent("d/e.json", b"e") and not store.write_if_absent("d/e.json", b"other")
    assert store.list() == ["a/b/c.bin", "d/e.json"] and store.read_bytes("d/e.json") == b"e"


def test_the_sdk_makes_one_attempt_per_call(volumes_server, proxy) -> None:
    """A dropped connection fails the call at once (the SDK would retry it itself): RemoteStore's
    ``retry`` counts every request."""
    store = open_store(f"{volumes_server.new_root()}/store", retry=3)
    store.write_bytes("a.bin", b"a")
    drop = proxy.add(volumes_server.download_fault("drop", r"a\.bin", times=3))
    with pytest.raises(StorageError, match=r"read of .*a\.bin failed after 3 attempt\(s\)"):
        store.read_bytes("a.bin")
    assert drop.hits == 3
    drop = proxy.add(volumes_server.download_fault("drop", r"a\.bin", times=2))
    assert store.read_bytes("a.bin") == b"a" and drop.hits == 2  # the third attempt succeeds


@pytest.mark.parametrize("status", [429, 503])
def test_throttling_is_waited_for_as_asked_within_the_deadline(volumes_server, status: int, clock) -> None:
    """The service's 429 or 503 with ``Retry-After``: waited for as long as it asks, not counted as an
    attempt (``retry=1`` here), until the wait would pass the file's deadline."""
    root = volumes_server.new_root()
    volume = root.rsplit("/", 1)[1]  # the session's server is shared: throttles name this test's volume
    store = open_store(f"{root}/store", retry=1, timeout=10)
    store.write_bytes("a.bin", b"a")
    read = volumes_server.throttle("GET", rf"{volume}/store/a\.bin", status, times=2, retry_after=1)
    assert store.read_bytes("a.bin") == b"a"
    assert read.hits == 2 and clock.sleeps == [1, 1]  # two waits of 1 s, then the answer
    write = volumes_server.throttle("PUT", rf"{volume}/store/b\.bin", status, times=1, retry_after=1)
    store.write_bytes("b.bin", b"b")
    assert write.hits == 1 and store.read_bytes("b.bin") == b"b" and clock.sleeps == [1, 1, 1]

    short = open_store(f"{root}/store", retry=3, timeout=1.5)
    read = volumes_server.throttle("GET", rf"{volume}/store/a\.bin", status, times=5, retry_after=1)
    clock.sleeps.clear()
    with pytest.raises(
        StorageError,
        match=rf"read of {root}/store/a\.bin failed: the store is throttling requests \(.*{status}.*"
        r"injected by the test\) and asks to wait 1 s more, past the 1.5 s deadline for the file",
    ):
        short.read_bytes("a.bin")
    assert read.hits == 2 and clock.sleeps == [1]  # waited once (0 + 1 <= 1.5), not twice


def test_an_error_answer_that_is_not_json_is_a_failed_attempt(volumes_server, proxy) -> None:
    """A proxy's XML 503 to an upload: the SDK slips describing it (TypeError); that is reported as the failure."""
    store = open_store(f"{volumes_server.new_root()}/store", retry=2)
    fault = proxy.add(volumes_server.upload_fault("status", r"b\.bin", value=503, times=2))
    with pytest.raises(
        StorageError,
        match=r"write of .*b\.bin failed after 2 attempt\(s\): OSError: .*could not "
        r"parse",
    ):
        store.write_bytes("b.bin", b"b")
    assert fault.hits == 2
    store.write_bytes("b.bin", b"b")
    assert store.read_bytes("b.bin") == b"b"


def test_a_wrong_token_is_one_clear_error_at_once(volumes_server, monkeypatch, clock) -> None:
    root = volumes_server.new_root()
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-revoked")
    store = open_store(root, retry=5)
    before = len(volumes_server.requests)
    with pytest.raises(
        StorageError,
        match=rf"read of {root}/index.json failed: PermissionError: .*refused the request \(403: "
        r"Invalid access token\.\).*DATABRICKS_TOKEN",
    ) as caught:
        store.read_bytes("index.json")
    assert isinstance(caught.value, MDSError) and "failed after" not in str(caught.value)
    assert "403 403" not in str(caught.value)  # the service sends the status as its error code
    assert len(volumes_server.requests) - before == 1 and clock.sleeps == []  # not retried, no backoff


def test_a_volume_without_grants_names_the_privileges(volumes_server) -> None:
    root = volumes_server.new_root()
    volumes_server.denied.add(root.split(":", 1)[1])
    with pytest.raises(
        StorageError,
        match=r"403 PERMISSION_DENIED: User does not have READ VOLUME.*READ VOLUME on "
        r"the volume, WRITE VOLUME to write",
    ):
        open_store(root).list()


def _open_without_a_token(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DATABRICKS_TOKEN")
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(
        ConfigurationError,
        match=r"dbfs:/Volumes/main/default/x: no usable Databricks credentials: "
        r"set DATABRICKS_HOST with DATABRICKS_TOKEN .* The Databricks SDK "
        r"said",
    ):
        open_store("dbfs:/Volumes/main/default/x")


def test_a_missing_token_is_one_clear_error(volumes_server, monkeypatch, tmp_path: Path) -> None:
    before = len(volumes_server.requests)
    _open_without_a_token(monkeypatch, tmp_path)
    # the SDK's probe of the host's metadata, and no API call without credentials
    assert volumes_server.requests[before:] == [("GET", "/.well-known/databricks-config")]


@pytest.mark.timing
def test_a_missing_token_fails_at_once(volumes_server, monkeypatch, tmp_path: Path) -> None:
    """The SDK's search for other credentials (profiles, CLIs, cloud metadata) ends within seconds."""
    start = time.monotonic()
    _open_without_a_token(monkeypatch, tmp_path)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(
    "url",
    ["dbfs:/FileStore/train", "dbfs:/mnt/bucket/train", "dbfs:/Volumes/main/default", "dbfs://Volumes/main/default/v"],
)
def test_only_volume_paths_are_accepted(url: str) -> None:
    with pytest.raises(
        ConfigurationError,
        match=rf"{url}: only Unity Catalog volumes are supported on dbfs:, as "
        r"dbfs:/Volumes/<catalog>/<schema>/<volume>/<path>",
    ):
        open_store(url)


def test_a_missing_volume_is_not_found(volumes_server) -> None:
    with pytest.raises(StorageError, match=r"Volume 'main.default.nope' does not exist"):
        open_store("dbfs:/Volumes/main/default/nope").read_bytes("index.json")


def test_vacuum_ages_files_by_their_modification_time(volumes_server, monkeypatch) -> None:
    root = f"{volumes_server.new_root()}/set"
    shard_set = ShardSet(root)
    for rows in (range(10), range(10, 20)):
        with shard_set.transaction("overwrite") as tx, MDSWriter(out=tx.out, columns={"id": "int"}) as writer:
            for i in rows:
                writer.write({"id": i})
    abandoned = shard_set.transaction("append")
    shard_set.store.write_bytes(f"data/{abandoned.id}/shard.00000.mds", b"partial")
    assert shard_set.vacuum(keep_last=1, grace=dt.timedelta(hours=1)).removed_versions == [1]
    assert any(abandoned.id in name for name in shard_set.store.list())  # younger than the grace: kept
    modified = shard_set.store.fs.info(f"{shard_set.store.path}/data/{abandoned.id}/shard.00000.mds")["LastModified"]
    assert abs((modified - dt.datetime.now(dt.UTC)).total_seconds()) < 60
    shard_set.vacuum(keep_last=1, grace=dt.timedelta(0))
    assert not any(abandoned.id in name for name in shard_set.store.list())
    assert [v.version for v in shard_set.versions()] == [2]


def test_hash_and_question_mark_stay_in_the_path(volumes_server, tmp_path: Path) -> None:
    """Both are legal in volume file names: the data goes exactly where the URL says, and reads back."""
    root = volumes_server.new_root()
    out = f"{root}/hash#1/what?x=1/ds"
    with MDSWriter(out=out, columns={"id": "int"}) as writer:
        for i in range(5):
            writer.write({"id": i})
    volume = root.split(":", 1)[1]
    written = sorted(path for path in volumes_server.files if path.startswith(volume))
    assert written == [f"{volume}/hash#1/what?x=1/ds/{name}" for name in ("index.json", "shard.00000.mds")]
    dataset = StreamingDataset(remote=out, local=str(tmp_path / "cache"), shuffle=False, batch_size=5)
    assert [sample["id"] for sample in dataset] == list(range(5))


def test_a_workspace_without_host_metadata_prints_nothing(volumes_server, monkeypatch, capfd, caplog) -> None:
    """The SDK warns on stderr each time a client is created; we keep one debug line per client instead."""
    monkeypatch.setattr(volumes_server, "host_metadata", False)
    root = volumes_server.new_root()
    with caplog.at_level(logging.DEBUG, logger="mds_core.storage.volumes_client"):
        for _ in range(3):
            open_store(root).write_bytes("a.bin", b"a")
    assert "host metadata" not in capfd.readouterr().err
    lines = [r.getMessage() for r in caplog.records if "host metadata" in r.getMessage()]
    assert lines == [f"{root}: the workspace serves no host metadata; using the explicit configuration"] * 3


@given(
    st.lists(
        st.text(alphabet=st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]), min_size=1).filter(
            lambda name: name not in (".", "..")
        ),
        min_size=1,
        max_size=4,
    )
)
def test_every_name_of_a_volume_path_stays_in_it(names: list[str]) -> None:
    """Whatever a file name holds (``#``, ``?``, ``%``, ``:``, spaces...), the path is the URL's, unchanged."""
    path = "/Volumes/main/ml/v/" + "/".join(names)
    assert volume_path(f"dbfs:{path}") == path and volume_path(f"dbfs://{path}") == path


@pytest.mark.parametrize("url", ["dbfs:/Volumes/main/ml/v/../other/ds", "dbfs:/Volumes/main/ml/v/./ds"])
def test_dot_segments_are_refused(url: str) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"^{re.escape(url)}: '\.' and '\.\.' are not allowed in a volume path"
    ):
        open_store(url)
