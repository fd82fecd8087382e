from __future__ import annotations

import hashlib

import pytest
import xxhash

from mds_core.errors import HashAlgorithmError
from mds_core.format.hashing import check_hash_list, get_hash, get_hashes


def test_supported_names_are_hashlib_plus_xxhash() -> None:
    sha = [f"sha{bits}" for bits in (224, 256, 384, 512)] + [f"sha3_{bits}" for bits in (224, 256, 384, 512)]
    expected = {"blake2b", "blake2s", "md5", "sha1", *sha, *"xxh32 xxh64 xxh3_64 xxh128 xxh3_128".split()}
    assert expected <= get_hashes()
    assert not any(name.startswith("shake_") for name in get_hashes())


def test_digests() -> None:
    assert get_hash("sha1", b"abc") == hashlib.sha1(b"abc").hexdigest()
    assert get_hash("xxh3_64", b"abc") == xxhash.xxh3_64(b"abc").hexdigest()
    assert len(get_hash("xxh3_64", b"abc")) == 16


@pytest.mark.parametrize(
    ("hashes", "message"),
    [
        (["sha1", "md5"], "sorted and unique"),
        (["md5", "md5"], "sorted and unique"),
        (["crc32"], "unknown hash algorithm 'crc32'"),
    ],
)
def test_bad_hash_lists(hashes: list[str], message: str) -> None:
    with pytest.raises(HashAlgorithmError, match=message):
        check_hash_list(hashes)


def test_good_hash_lists() -> None:
    assert check_hash_list(None) == []
    assert check_hash_list(["md5", "sha256", "xxh3_64"]) == ["md5", "sha256", "xxh3_64"]
