"""delta_to_mds on real Delta tables that deltalake writes on local disk: versions, timestamps, every log shape."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from mds_core.convert.delta import delta_to_mds
from mds_core.errors import (
    ConversionError,
    DeltaTableError,
    DeltaTableNotFoundError,
    MissingDependencyError,
    UnsupportedDeltaFeatureError,
)
from tests.delta.tables import commit_deletion_vector, ids, require_reader_feature, rows

deltalake = pytest.importorskip("deltalake")
DeltaTable, write_deltalake = deltalake.DeltaTable, deltalake.write_deltalake


def _rows_at(table: Path, out: Path, **kwargs) -> list[dict]:
    delta_to_mds(table, out, **kwargs)
    return rows(out)


def test_appends_read_at_each_version_with_the_tables_id(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(3), "s": ["a", "b", "c"]}))
    write_deltalake(table, pa.table({"id": ids(2, 3), "s": ["d", "e"]}), mode="append")
    table_id = DeltaTable(table).metadata().id

    first = delta_to_mds(table, tmp_path / "v0", version=0)
    latest = delta_to_mds(str(table), tmp_path / "latest")

    assert (first.version, latest.version) == (0, 1)
    assert first.table_id == latest.table_id == table_id
    assert first.table_uri == latest.table_uri == table.as_uri() + "/"
    assert (first.stats.rows, latest.stats.rows, latest.stats.shards) == (3, 5, 1)
    assert rows(tmp_path / "v0") == [{"id": 0, "s": "a"}, {"id": 1, "s": "b"}, {"id": 2, "s": "c"}]
    assert [r["s"] for r in rows(tmp_path / "latest")] == ["a", "b", "c", "d", "e"]


def _committed_at(table: Path, version: int) -> datetime:
    """When ``version`` was committed as time travel reads it: its commit file's modification time, in ms.

    Not ``DeltaTable.history()``'s ``timestamp``: that is the writer's clock before the file was written, and
    can be a millisecond earlier (which made this test read the version before).
    """
    modified_ns = (table / "_delta_log" / f"{version:020d}.json").stat().st_mtime_ns
    return datetime.fromtimestamp(0, UTC) + timedelta(milliseconds=modified_ns // 1_000_000)


def test_a_timestamp_reads_the_version_current_then(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for version in range(3):
        write_deltalake(table, pa.table({"id": ids(1, version)}), mode="append")
        time.sleep(0.01)  # each commit its own millisecond
    committed = {version: _committed_at(table, version) for version in range(3)}

    at_v1 = delta_to_mds(table, tmp_path / "a", timestamp=committed[1] + timedelta(microseconds=500))
    as_text = delta_to_mds(table, tmp_path / "b", timestamp=committed[0].isoformat())
    naive_utc = delta_to_mds(table, tmp_path / "c", timestamp=committed[2].replace(tzinfo=None))

    assert (at_v1.version, as_text.version, naive_utc.version) == (1, 0, 2)
    assert [r["id"] for r in rows(tmp_path / "a")] == [0, 1]
    assert [r["id"] for r in rows(tmp_path / "b")] == [0]


def test_a_timestamp_before_the_table_existed_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(1)}))
    with pytest.raises(
        DeltaTableError, match=rf"{table} was created at .*, after the timestamp 2001-01-01T00:00:00\+00:00"
    ):
        delta_to_mds(table, tmp_path / "out", timestamp="2001-01-01T00:00:00Z")
    with pytest.raises(DeltaTableError, match="timestamp 'yesterday' for .* is not an ISO 8601"):
        delta_to_mds(table, tmp_path / "out", timestamp="yesterday")
    assert not (tmp_path / "out").exists()


def test_version_and_timestamp_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DeltaTableError, match=r"version= or timestamp=, not both \(table .*nowhere\)"):
        delta_to_mds(tmp_path / "nowhere", tmp_path / "out", version=1, timestamp="2026-01-01T00:00:00Z")


def test_a_missing_table_or_version_names_the_uri(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DeltaTableNotFoundError, match=f"no Delta table at {missing}"):
        delta_to_mds(missing, tmp_path / "out")
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(1)}))
    with pytest.raises(DeltaTableNotFoundError, match=f"{table} has no version 7: its latest is 0"):
        delta_to_mds(table, tmp_path / "out", version=7)
    with pytest.raises(DeltaTableError, match=r"a Delta table version is a whole number from 0, got -1"):
        delta_to_mds(table, tmp_path / "out", version=-1)
    assert isinstance(DeltaTableNotFoundError("x"), FileNotFoundError)


def test_partitions_and_a_predicate(tmp_path: Path) -> None:
    table = tmp_path / "t"
    data = pa.table({"id": ids(4), "day": ["2026-01-01", "2026-01-02", "2026-01-01", "2026-01-02"]})
    write_deltalake(table, data, partition_by=["day"])

    delta_to_mds(table, tmp_path / "all")
    delta_to_mds(table, tmp_path / "day2", predicate="day = '2026-01-02' AND id > 1")

    assert rows(tmp_path / "all") == data.to_pylist()
    assert rows(tmp_path / "day2") == [{"id": 3, "day": "2026-01-02"}]


def test_columns_read_only_those_with_those_encodings(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(2), "s": ["a", "b"], "x": [1.5, 2.5]}))
    delta_to_mds(table, tmp_path / "out", {"x": "float64", "id": "json"})
    assert rows(tmp_path / "out") == [{"x": 1.5, "id": 0}, {"x": 2.5, "id": 1}]
    with pytest.raises(ConversionError, match="nope"):
        delta_to_mds(table, tmp_path / "bad", {"nope": "int32"})


def test_an_added_column_is_null_in_older_rows(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(2)}))
    write_deltalake(table, pa.table({"id": ids(1, 2), "score": [0.5]}), mode="append", schema_mode="merge")

    assert _rows_at(table, tmp_path / "v0", version=0) == [{"id": 0}, {"id": 1}]
    with pytest.raises(ConversionError, match="score"):
        delta_to_mds(table, tmp_path / "strict", version=1)
    filled = delta_to_mds(table, tmp_path / "v1", version=1, null_policy="fill", fill_values={"score": -1.0})
    assert filled.stats.rows == 3
    assert rows(tmp_path / "v1") == [{"id": 0, "score": -1.0}, {"id": 1, "score": -1.0}, {"id": 2, "score": 0.5}]


def test_deletes_and_updates_rewrite_files_and_each_version_keeps_its_rows(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(
        table, pa.table({"id": ids(4), "s": list("abcd")}), configuration={"delta.enableDeletionVectors": "true"}
    )
    DeltaTable(table).delete("id = 1")
    DeltaTable(table).update(updates={"s": "'z'"}, predicate="id = 2")
    # deltalake 1.6 writes no deletion vector even where the table enables them: it rewrites the file.
    assert pa.table(DeltaTable(table).deletion_vectors()).num_rows == 0

    assert [r["s"] for r in _rows_at(table, tmp_path / "v0", version=0)] == ["a", "b", "c", "d"]
    assert _rows_at(table, tmp_path / "v1", version=1) == [
        {"id": 0, "s": "a"},
        {"id": 2, "s": "c"},
        {"id": 3, "s": "d"},
    ]
    assert _rows_at(table, tmp_path / "v2", version=2) == [
        {"id": 0, "s": "a"},
        {"id": 2, "s": "z"},
        {"id": 3, "s": "d"},
    ]


def test_deletion_vectors_are_applied(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(10)}), configuration={"delta.enableDeletionVectors": "true"})
    version = commit_deletion_vector(table, [2, 5, 9])
    assert "deletionVectors" in (DeltaTable(table).protocol().reader_features or [])

    assert [r["id"] for r in _rows_at(table, tmp_path / "dv", version=version)] == [0, 1, 3, 4, 6, 7, 8]
    assert [r["id"] for r in _rows_at(table, tmp_path / "before", version=version - 1)] == list(range(10))


def test_column_mapping_is_honoured(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(
        table, pa.table({"id": ids(2), "a name": ["x", "y"]}), configuration={"delta.columnMapping.mode": "name"}
    )
    assert _rows_at(table, tmp_path / "out") == [{"id": 0, "a name": "x"}, {"id": 1, "a name": "y"}]


def test_an_overwrite_replaces_the_rows_and_older_versions_keep_theirs(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(3)}))
    write_deltalake(table, pa.table({"id": ids(2, 100)}), mode="overwrite")
    assert _rows_at(table, tmp_path / "v1", version=1) == [{"id": 100}, {"id": 101}]
    assert _rows_at(table, tmp_path / "v0", version=0) == [{"id": 0}, {"id": 1}, {"id": 2}]


def test_compaction_keeps_the_rows(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for start in range(0, 10, 2):
        write_deltalake(table, pa.table({"id": ids(2, start)}), mode="append")
    metrics = DeltaTable(table).optimize.compact()
    compacted = DeltaTable(table)
    assert (metrics["numFilesRemoved"], len(compacted.file_uris())) == (5, 1)

    result = delta_to_mds(table, tmp_path / "after")
    assert result.version == 5
    assert [r["id"] for r in rows(tmp_path / "after")] == list(range(10))
    assert [r["id"] for r in _rows_at(table, tmp_path / "before", version=4)] == list(range(10))


def test_vacuumed_files_are_reported_with_the_version(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(2)}))
    write_deltalake(table, pa.table({"id": ids(1, 7)}), mode="overwrite")
    DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)

    with pytest.raises(DeltaTableError, match=rf"reading {table.as_uri()}/ at version 0 failed: a data file is gone"):
        delta_to_mds(table, tmp_path / "v0", version=0)
    assert _rows_at(table, tmp_path / "v1", version=1) == [{"id": 7}]


def test_a_log_with_a_checkpoint_reads_without_the_commits_before_it(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for start in range(4):
        write_deltalake(table, pa.table({"id": ids(1, start)}), mode="append")
    DeltaTable(table).create_checkpoint()
    write_deltalake(table, pa.table({"id": ids(1, 4)}), mode="append")
    log = table / "_delta_log"
    assert (log / f"{3:020}.checkpoint.parquet").exists()
    for version in range(3):  # commits the checkpoint covers: the reader must start from the checkpoint
        (log / f"{version:020}.json").unlink()

    result = delta_to_mds(table, tmp_path / "out")
    assert result.version == 4
    assert [r["id"] for r in rows(tmp_path / "out")] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("feature", "named"),
    [
        ("typeWidening", "typeWidening"),
        ("vacuumProtocolCheck", "vacuumProtocolCheck"),
        ("catalogManaged", "catalogManaged"),
        ("someFutureFeature", "someFutureFeature"),
    ],
)
def test_a_reader_feature_deltalake_cannot_honour_is_refused(tmp_path: Path, feature: str, named: str) -> None:
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(2)}))
    require_reader_feature(table, feature)
    with pytest.raises(UnsupportedDeltaFeatureError) as refused:
        delta_to_mds(table, tmp_path / "out")
    assert str(refused.value).startswith(f"{table} needs the reader feature(s) {named}, which deltalake ")
    assert not (tmp_path / "out").exists()


def test_without_deltalake_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'mds-pipelines\[delta\]'"):
        delta_to_mds(tmp_path / "t", tmp_path / "out")


def test_a_feature_refused_only_when_scanned_is_still_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Were the list of honoured features too generous, delta-rs's own refusal at scan time still names it.
    from mds_core.convert import delta

    monkeypatch.setattr(delta, "HONOURED_READER_FEATURES", delta.HONOURED_READER_FEATURES | {"typeWidening-preview"})
    table = tmp_path / "t"
    write_deltalake(table, pa.table({"id": ids(2)}))
    require_reader_feature(table, "typeWidening-preview")
    with pytest.raises(UnsupportedDeltaFeatureError, match=r"needs the reader feature\(s\) typeWidening-preview, "):
        delta_to_mds(table, tmp_path / "out")
