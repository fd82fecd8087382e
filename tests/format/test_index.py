"""index.json: strict parsing with messages that name the file and shard."""

from __future__ import annotations

import json

import pytest

from mds_core.errors import InvalidIndexError, UnsafePathError
from mds_core.format.index import dumps_index, parse_index
from tests.golden import GOLDEN
from tests.streaming.support import anonymous_growth_mib

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


def test_a_parsed_index_keeps_one_copy_of_what_its_shards_repeat() -> None:
    shards = parse_index(GOOD)
    first, second = shards[0], shards[1]
    assert first.column_names is second.column_names and first.column_encodings is second.column_encodings
    assert first.hashes is second.hashes and first.column_sizes is second.column_sizes
    assert first.raw_data.hashes != second.raw_data.hashes  # each file's own digests


# An index of 10**4 shards, made in a fresh interpreter before the measured parse.
_INDEX_10K = """
from mds_core.format.index import FileInfo, ShardInfo, dumps_index, parse_index
shards = [
    ShardInfo(["id", "tokens"], ["int", "ndarray:uint16:4"], [8, None], None, [],
              FileInfo(f"shard.{i:05}.mds", 160_000, {}), 10_000, 1 << 26, None)
    for i in range(10_000)
]
text = dumps_index(shards).encode()
del shards
"""


def test_a_parsed_index_of_ten_thousand_shards_keeps_little_memory() -> None:
    # Each rank holds its parsed index, and each DataLoader worker copies the pages it touches. Parsed into objects
    # scattered between the JSON's freed ones, 10**4 shards kept 18.6 MiB of Python's memory arenas; now 7.
    grown = anonymous_growth_mib(_INDEX_10K, "parsed = parse_index(text)")
    assert grown < 10, f"parsing 10**4 shards kept {grown:.1f} MiB"
