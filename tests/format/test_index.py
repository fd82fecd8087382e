"""index.json: strict parsing with messages that name the file and shard."""

from __future__ import annotations

import json

import pytest

from mds_core.errors import InvalidIndexError, UnsafePathError
from mds_core.format.index import dumps_index, parse_index
from tests.golden import GOLDEN

GOOD = (GOLDEN / "datasets/mixed_zstd/index.json").read_text()


def _edited(edit) -> str:
    obj = json.loads(GOOD)
    edit(obj)
    return json.dumps(obj)


def test_round_trip_is_byte_identical() -> None:
    for name in ("mixed_zstd", "scalars", "zero_sample_shard", "empty"):
        text = (GOLDEN / "datasets" / name / "index.json").read_text()
        assert dumps_index(parse_index(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "expected an object with keys"),
        (_edited(lambda o: o.update(version=3)), "index version 3 is not supported"),
        (_edited(lambda o: o.update(extra=1)), "expected an object with keys"),
        (_edited(lambda o: o["shards"][1].pop("samples")), r"shard 1: missing keys \['samples'\]"),
        (_edited(lambda o: o["shards"][0].update(foo=1)), r"shard 0: missing keys \[\], unexpected keys \['foo'\]"),
        (_edited(lambda o: o["shards"][0].update(format="json")), "format 'json' is not supported"),
        (_edited(lambda o: o["shards"][0].update(samples=-1)), "'samples' must be a non-negative int"),
        (_edited(lambda o: o["shards"][0].update(samples="3")), "'samples' must be a non-negative int"),
        (_edited(lambda o: o["shards"][0]["raw_data"].update(bytes=None)), "'bytes' must be a non-negative int"),
        (_edited(lambda o: o["shards"][0].update(column_names=["a"])), "differ in length"),
        (_edited(lambda o: o["shards"][0].update(zip_data=None)), "'zip_data' must be present exactly"),
        (_edited(lambda o: o["shards"][0]["raw_data"].pop("hashes")), "must be an object with keys"),
    ],
)
def test_bad_indexes_raise(text: str, message: str) -> None:
    with pytest.raises(InvalidIndexError, match=message) as info:
        parse_index(text, "some/index.json")
    assert "some/index.json" in str(info.value)


@pytest.mark.parametrize("basename", ["/etc/passwd", "../escape.mds", "a/../../b.mds", "a\\..\\b", "", "c:/x"])
def test_path_tricks_in_basenames_raise(basename: str) -> None:
    text = _edited(lambda o: o["shards"][2]["raw_data"].update(basename=basename))
    with pytest.raises(UnsafePathError, match=r"shard 2 raw_data") if basename else pytest.raises(InvalidIndexError):
        parse_index(text)


def test_nested_basenames_are_fine() -> None:
    text = _edited(lambda o: o["shards"][0]["raw_data"].update(basename="a/b/shard.00000.mds"))
    assert parse_index(text)[0].raw_data.basename == "a/b/shard.00000.mds"
