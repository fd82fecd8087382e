"""Compression codecs by name, the zstd frame the reference needs, and errors naming the extra."""

from __future__ import annotations

import io
import sys

import pytest
import zstandard

from mds_core.errors import CompressionError, MissingDependencyError
from mds_core.format.compression import get_codec, get_compressions

DATA = b"mds " * 5000 + bytes(range(256))


def test_accepted_names_match_the_reference() -> None:
    names = get_compressions()
    assert {"br", "bz2", "gz", "snappy", "zstd", "zstd:1", "zstd:22", "gz:0", "br:0", "br:11", "bz2:1"} <= names
    assert not {"zstd:0", "zstd:23", "gz:10", "bz2:0", "snappy:1", "gzip", "brotli"} & names
    assert len(names) == 5 + 12 + 9 + 10 + 22


@pytest.mark.parametrize("name", ["zstd:0", "zstd:23", "gzip", "brotli", "snappy:1", "gz:x", "zstd:"])
def test_invalid_names_raise(name: str) -> None:
    with pytest.raises(CompressionError, match="is not a supported compression algorithm"):
        get_codec(name)


def test_defaults_and_levels() -> None:
    assert get_codec(None) is None and get_codec("") is None
    assert get_codec("zstd").level == 3
    assert get_codec("zstd:7").level == 7 and get_codec("zstd:7").extension == "zstd"
    assert get_codec("gz").level == 9 and get_codec("br").level == 11 and get_codec("bz2").level == 9


@pytest.mark.parametrize("name", ["zstd", "zstd:19", "gz", "gz:1", "bz2", "br:5", "snappy"])
def test_round_trip_and_streaming_decompression(name: str) -> None:
    codec = get_codec(name)
    packed = codec.compress(DATA)
    assert codec.decompress(packed) == DATA
    out = io.BytesIO()
    codec.decompress_file(io.BytesIO(packed), out)
    assert out.getvalue() == DATA


def test_zstd_frames_carry_the_content_size() -> None:
    packed = get_codec("zstd").compress(DATA)
    assert zstandard.get_frame_parameters(packed).content_size == len(DATA)


def test_gz_output_is_reproducible() -> None:
    assert get_codec("gz").compress(DATA) == get_codec("gz").compress(DATA)


def test_snappy_is_the_raw_block_format() -> None:
    packed = get_codec("snappy").compress(b"abc")
    assert packed[0] == 3  # varint of the uncompressed length, no stream identifier


@pytest.mark.parametrize("name", ["zstd", "gz", "bz2", "br", "snappy"])
def test_garbage_raises_compression_error(name: str) -> None:
    with pytest.raises(CompressionError, match=f"does not decompress as {name.split(':')[0]}"):
        get_codec(name).decompress(b"\x00garbage" * 3)


@pytest.mark.parametrize(("name", "module", "extra"), [("br", "brotli", "br"), ("snappy", "cramjam", "snappy")])
def test_missing_package_names_the_extra(monkeypatch, name: str, module: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if not installed
    with pytest.raises(MissingDependencyError, match=rf"pip install 'mds-pipelines\[{extra}\]'"):
        get_codec(name)


def test_zstd_many_frames_decompress_and_truncation_is_named() -> None:
    codec = get_codec("zstd")
    raw = bytes(range(256)) * 3000
    # 300 frames of 2,560 bytes, plus an empty one: bigger than one feed piece in total.
    framed = b"".join(codec.compress(raw[i : i + 2560]) for i in range(0, len(raw), 2560)) + codec.compress(b"")
    assert codec.decompress(framed) == raw
    for cut in (len(framed) - 2, len(framed) // 2, 0):
        with pytest.raises(CompressionError, match="zstd data is truncated"):
            codec.decompress(framed[:cut])
