"""Finding 11 of the review: hostile input that escaped as IndexError, RecursionError or ValueError, and
basenames that collided with a reader's own files."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from mds_core.errors import DecodeError, InvalidIndexError, InvalidManifestError, UnsafePathError
from mds_core.format.index import check_basename, parse_index
from mds_core.format.scalars import JSONCoder
from mds_core.storage.remote import open_store
from mds_core.versions import ShardSet
from mds_core.versions.head import newest_listed
from mds_core.versions.manifest import is_manifest
from mds_core.versions.verdicts import read_verdict, verdict_of_kept
from tests.security.conftest import commit_ids, write_ids


@pytest.mark.parametrize(
    "name", [".", "./", "a/", "index.json", "./index.json", ".mds-cache/ledger-0.u64", ".mds-cache"]
)
def test_basenames_that_name_no_file_or_a_readers_own_files_are_refused(name: str) -> None:
    with pytest.raises(UnsafePathError, match="basename"):
        check_basename(name, "w")


def test_a_shard_whose_raw_and_zip_files_are_one_file_is_refused(tmp_path: Path) -> None:
    write_ids(str(tmp_path), [1], compression="zstd")
    text = (tmp_path / "index.json").read_text().replace("shard.00000.mds.zstd", "shard.00000.mds")
    with pytest.raises(UnsafePathError, match="raw_data and zip_data name the same file"):
        parse_index(text, "w")


def test_deep_json_in_a_value_is_a_decode_error() -> None:
    # Garbage left by earlier tests in this worker, collected while the parser is deep in recursion, once
    # ran a finalizer there, and pytest's hook for its exception failed for lack of stack: collect it first.
    gc.collect()
    data = b"[" * 200_000
    with pytest.raises(DecodeError, match="'json' value does not parse"):
        JSONCoder().decode(data, 0, len(data))


def test_a_deep_verdict_is_an_invalid_manifest(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path))
    commit_ids(shard_set, [1])
    shard_set.record_verdict(1, "smoke", {"ok": True})
    (tmp_path / "_versions" / "checks" / "1" / "smoke.json").write_bytes(b"[" * 200_000)
    gc.collect()  # as above
    with pytest.raises(InvalidManifestError, match="the verdict is not JSON"):
        read_verdict(open_store(str(tmp_path)), 1, "smoke")


@pytest.mark.parametrize("digits", ["9" * 5000, "\u0661\u0662", "0" * 19])
def test_manifest_names_with_odd_digits_are_not_manifests(digits: str) -> None:
    name = f"_versions/{digits}.json"
    assert not is_manifest(name)
    assert newest_listed([name, "_versions/00000002.json"]) == 2
    assert not verdict_of_kept(f"_versions/checks/{digits}/smoke.json", {1})


def test_a_listing_with_a_huge_manifest_name_still_lists_versions(tmp_path: Path) -> None:
    shard_set = ShardSet(str(tmp_path))
    commit_ids(shard_set, [1])
    (tmp_path / "_versions" / ("9" * 5000)[:200]).with_suffix(".json").write_text("{}")
    assert [v.version for v in shard_set.versions()] == [1]
    with pytest.raises(InvalidIndexError):
        parse_index(b'{"shards": [' * 100_000, "deep")


def test_a_deep_json_setting_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the fuzzing campaign: ``$MDS_STORAGE_OPTIONS`` nested 100,000 deep raised RecursionError."""
    from mds_core.errors import ConfigurationError
    from pipelines.resources import ShardStore

    deep = "[" * 100_000 + "]" * 100_000
    monkeypatch.setenv("MDS_STORAGE_OPTIONS", deep)
    with pytest.raises(ConfigurationError, match=r"\$MDS_STORAGE_OPTIONS is not valid JSON"):
        ShardStore(storage_options_json=deep).options()
