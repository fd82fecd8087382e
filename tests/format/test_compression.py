"""Compression codecs by name, the zstd frame the reference needs, and errors naming the extra."""

from __future__ import annotations

import io
import sys
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from mds_core.errors import CompressionError, MissingDependencyError
from mds_core.format.compression import Codec, get_codec, get_compressions

DATA = b"mds " * 5000 + bytes(range(256))


def codec_named(name: str) -> Codec:
    """The codec of a compression name that means one (not ``None`` or ``""``)."""
    codec = get_codec(name)
    assert codec is not None, name
    return codec


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
    assert codec_named("zstd").level == 3
    assert codec_named("zstd:7").level == 7 and codec_named("zstd:7").extension == "zstd"
    assert codec_named("gz").level == 9 and codec_named("br").level == 11 and codec_named("bz2").level == 9


def test_zstd_carries_the_content_size_gz_is_reproducible_snappy_is_the_raw_block_format() -> None:
    assert zstandard.get_frame_parameters(codec_named("zstd").compress(DATA)).content_size == len(DATA)
    assert codec_named("gz").compress(DATA) == codec_named("gz").compress(DATA)
    assert codec_named("snappy").compress(b"abc")[0] == 3  # varint of the uncompressed length, no stream identifier


@pytest.mark.parametrize("name", ["zstd", "gz", "bz2", "br", "snappy"])
def test_garbage_raises_compression_error(name: str) -> None:
    with pytest.raises(CompressionError, match=f"does not decompress as {name.split(':')[0]}"):
        codec_named(name).decompress(b"\x00garbage" * 3)


@pytest.mark.parametrize(("name", "module", "extra"), [("br", "brotli", "br"), ("snappy", "cramjam", "snappy")])
def test_missing_package_names_the_extra(monkeypatch, name: str, module: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if not installed
    with pytest.raises(MissingDependencyError, match=rf"pip install 'mds-pipelines\[{extra}\]'"):
        get_codec(name)


def test_zstd_many_frames_decompress_and_truncation_is_named() -> None:
    codec = codec_named("zstd")
    raw = bytes(range(256)) * 3000
    # 300 frames of 2,560 bytes, plus an empty one: bigger than one feed piece in total.
    framed = b"".join(codec.compress(raw[i : i + 2560]) for i in range(0, len(raw), 2560)) + codec.compress(b"")
    assert codec.decompress(framed) == raw
    for cut in (len(framed) - 2, len(framed) // 2, 0):
        with pytest.raises(CompressionError, match="zstd data is truncated"):
            codec.decompress(framed[:cut])


# ------------------------------------------------------------------------------------------------
# bounded decompression: never past the size the index declares (security review, finding 4)

FAMILIES = ["zstd", "gz", "bz2", "br", "snappy"]


@pytest.mark.parametrize("name", [*FAMILIES, "zstd:19", "gz:1", "br:5"])
def test_round_trips_in_memory_and_streaming_up_to_exactly_the_limit(name: str) -> None:
    codec, family, limit = codec_named(name), name.split(":")[0], len(DATA)
    packed = codec.compress(DATA)
    assert codec.decompress(packed) == codec.decompress(packed, limit=limit) == DATA
    for bound in (None, limit):
        out = io.BytesIO()
        codec.decompress_file(io.BytesIO(packed), out, bound)
        assert out.getvalue() == DATA
    out = io.BytesIO()
    with pytest.raises(CompressionError, match=rf"^{family} data inflates past the declared {limit - 1} bytes"):
        codec.decompress_file(io.BytesIO(packed), out, limit - 1)
    assert len(out.getvalue()) <= limit - 1
    with pytest.raises(CompressionError, match=f"inflates past the declared {limit - 1} bytes"):
        codec.decompress(packed, limit=limit - 1)


def _bomb(name: str, size: int) -> bytes:
    codec = codec_named(name)
    if codec.concatenable:  # a MiB of zeros many times: zstd frames, gzip members, bz2 streams
        return codec.compress(bytes(1 << 20)) * (size >> 20)
    if name == "br":
        import brotli

        compressor = brotli.Compressor(quality=5)
        return b"".join([compressor.process(bytes(1 << 20)) for _ in range(size >> 20)] + [compressor.finish()])
    return codec.compress(bytes(size))


@pytest.mark.parametrize("name", FAMILIES)
def test_a_bomb_stops_at_the_limit_with_a_chunk_of_memory(name: str, tmp_path: Path) -> None:
    limit = 3 << 20  # more than a chunk: some output is written before the refusal
    bomb = _bomb(name, 64 << 20)
    with open(tmp_path / "out", "wb") as sink:  # a file: what the decompression wrote is not held in memory
        tracemalloc.start()
        try:
            with pytest.raises(CompressionError, match=f"inflates past the declared {limit} bytes"):
                codec_named(name).decompress_file(io.BytesIO(bomb), sink, limit)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert sink.tell() <= limit
    # A few 1 MiB chunks (gzip and bz2 readers copy each one twice), never the 64 MiB.
    assert peak < 8 << 20, f"{name}: {peak:,} bytes at the peak"


@pytest.mark.parametrize("name", ["zstd", "gz", "bz2"])
def test_concatenated_pieces_decompress_within_the_limit(name: str) -> None:
    codec = codec_named(name)
    pieces = [bytes([i]) * 70000 for i in range(40)]  # 2.8 MB: several pieces per 1 MiB chunk
    packed = b"".join(codec.compress(piece) for piece in pieces)
    raw = b"".join(pieces)
    assert codec.decompress(packed, limit=len(raw)) == raw
    with pytest.raises(CompressionError, match="inflates past"):
        codec.decompress(packed, limit=len(raw) - len(pieces[-1]))


def test_brotli_truncated_or_followed_by_more_is_refused() -> None:
    codec = codec_named("br")
    packed = codec.compress(DATA)
    for bad in (packed[:-2], packed[: len(packed) // 2], b""):
        with pytest.raises(CompressionError, match="br"):
            codec.decompress(bad, limit=len(DATA))
    with pytest.raises(CompressionError, match="br"):
        codec.decompress(packed + b"x", limit=len(DATA))


def test_snappy_is_refused_by_its_length_header_before_it_is_decompressed() -> None:
    codec = codec_named("snappy")
    packed = codec.compress(DATA)
    with pytest.raises(CompressionError, match=rf"inflates past the declared 100 bytes: its header says {len(DATA)}"):
        codec.decompress(packed, limit=100)
    with pytest.raises(CompressionError, match="longer than any encoding"):  # never read past what could be valid
        codec.decompress_file(io.BytesIO(b"\x01" + bytes(100)), io.BytesIO(), 10)
    with pytest.raises(CompressionError, match="does not decompress as snappy"):
        codec.decompress(packed[:-1], limit=len(DATA))
