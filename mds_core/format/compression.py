"""Compression codecs by name: ``zstd``, ``zstd:7``, ``gz:9``, ``bz2``, ``br``, ``snappy``.

A codec is parsed once from its name. ``br`` and ``snappy`` need optional packages; asking for them
without the package installed names the extra to install.
"""

from __future__ import annotations

import bz2
import gzip
import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol

from mds_core.errors import CompressionError, MissingDependencyError

# family: (lowest level, highest level, default level); None means the codec has no levels.
_LEVELS: dict[str, tuple[int, int, int] | None] = {
    "br": (0, 11, 11),
    "bz2": (1, 9, 9),
    "gz": (0, 9, 9),
    "snappy": None,
    "zstd": (1, 22, 3),
}
_EXTRAS = {"br": ("brotli", "br"), "snappy": ("cramjam", "snappy")}  # family -> (package, extra)
_CHUNK = 1 << 20
_SNAPPY_HEADER = 5  # the varint of a 32-bit uncompressed length

if TYPE_CHECKING:
    import zstandard
    from typing_extensions import Buffer


class Writer(Protocol):
    """Where decompressed bytes go: a binary file, or anything with its ``write``."""

    def write(self, data: Buffer, /) -> int:
        """Write ``data``; return how many bytes were taken."""


@dataclass(frozen=True)
class Codec:
    """One compression family at one level. ``extension`` names the compressed shard files."""

    family: str
    level: int | None

    @property
    def extension(self) -> str:
        """The compressed files' extension: the family's name."""
        return self.family

    @property
    def concatenable(self) -> bool:
        """Whether compressed pieces can simply be concatenated (zstd frames, gzip members, bz2 streams)."""
        return self.family in ("zstd", "gz", "bz2")

    def compress(self, data: bytes) -> bytes:
        """``data`` compressed at this codec's level."""
        return _COMPRESSORS[self.family](data, self.level)

    def compressor(self) -> Callable[[bytes], bytes]:
        """``compress`` for many calls on one thread, reusing one compression context.

        A zstd context takes ~1 MB of workspace to set up; made anew for every ~112 KiB chunk, it
        sometimes doubled the writer's CPU time (when the allocator handed back fresh pages).
        """
        if self.family == "zstd":
            return _zstd_compressor(_level(self.family, self.level)).compress
        return self.compress

    def decompress(self, data: bytes, limit: int | None = None) -> bytes:
        """``data`` decompressed; with ``limit``, a ``CompressionError`` as soon as it would pass ``limit`` bytes."""
        if limit is not None:  # the bounded streaming path, into memory: at most ``limit`` bytes are held
            out = io.BytesIO()
            self.decompress_file(io.BytesIO(data), out, limit)
            return out.getvalue()
        try:
            return _DECOMPRESSORS[self.family](data)
        except MissingDependencyError:
            raise
        except Exception as err:  # each library raises its own error type
            raise CompressionError(f"data does not decompress as {self.family}: {err}") from err

    def decompress_file(self, src: IO[bytes], dst: Writer, limit: int | None = None) -> None:
        """Stream-decompress ``src`` into ``dst`` a chunk at a time, so peak memory stays small.

        ``limit`` is the size the index declares: a ``CompressionError`` is raised before the output
        would pass it (a decompression bomb then costs a chunk of work, not its inflated size), and
        nothing past it is written. Snappy's raw block format cannot be streamed: its length header is
        checked against ``limit`` first, then the block is decompressed in memory.
        """
        out: Writer = dst if limit is None else _Limited(dst, limit, self.family)
        try:
            if self.family == "zstd":  # every concatenated frame, written out in zstd's 128 KiB blocks
                _zstd().ZstdDecompressor().copy_stream(src, out)
            elif self.family in ("gz", "bz2"):  # every concatenated member (gz) or stream (bz2)
                opener: Callable[..., Any] = gzip.open if self.family == "gz" else bz2.open
                with opener(src, "rb") as stream:
                    shutil.copyfileobj(stream, out, _CHUNK)  # each read inflates at most one chunk
            elif self.family == "br":
                _brotli_copy(src, out)
            else:
                _snappy_copy(src, out, limit)
        except (MissingDependencyError, CompressionError):
            raise
        except Exception as err:
            raise CompressionError(f"data does not decompress as {self.family}: {err}") from err


class _Limited:
    """A writer that refuses the write that would take its output past ``limit`` bytes."""

    __slots__ = ("_dst", "_family", "_limit", "_room")

    def __init__(self, dst: Writer, limit: int, family: str) -> None:
        self._dst, self._limit, self._room, self._family = dst, limit, limit, family

    def write(self, data: Buffer) -> int:
        size = memoryview(data).nbytes
        if size > self._room:
            raise CompressionError(f"{self._family} data inflates past the declared {self._limit} bytes")
        self._room -= size
        return self._dst.write(data)


def _brotli_copy(src: IO[bytes], out: Writer) -> None:
    """Brotli a chunk in, at most about a chunk out per call (brotli >= 1.1's ``output_buffer_limit``)."""
    decompressor = _brotli().Decompressor()
    while not decompressor.is_finished():
        # Pending output must be drained with empty input before the decoder takes more.
        chunk = src.read(_CHUNK) if decompressor.can_accept_more_data() else b""
        output = decompressor.process(chunk, output_buffer_limit=_CHUNK)
        out.write(output)
        if not chunk and not output and not decompressor.is_finished():
            raise CompressionError("br data is truncated: the stream ends before its last block")
    if src.read(1):  # what follows the end of the stream: brotli.decompress refuses it too
        raise CompressionError("br data goes on past the end of its stream")


def _snappy_copy(src: IO[bytes], out: Writer, limit: int | None) -> None:
    """The raw block in memory, once its length header fits ``limit``; its input read only as far as it can go."""
    snappy = _snappy().snappy
    head = src.read(_SNAPPY_HEADER)
    size = snappy.decompress_raw_len(head)
    if limit is not None and size > limit:
        raise CompressionError(f"snappy data inflates past the declared {limit} bytes: its header says {size}")
    # No valid encoding of ``size`` bytes is longer than this (a copy of one byte takes five), so
    # reading one byte more is enough to refuse the block without holding whatever follows.
    longest = _SNAPPY_HEADER + 5 * size
    data = head + src.read(longest + 1 - len(head))
    if len(data) > longest:
        raise CompressionError(f"snappy data is longer than any encoding of the {size} bytes its header gives")
    out.write(snappy.decompress_raw(data))


def get_compressions() -> set[str]:
    """Every accepted compression string, as the reference lists them."""
    names = set(_LEVELS)
    for family, levels in _LEVELS.items():
        if levels:
            names.update(f"{family}:{level}" for level in range(levels[0], levels[1] + 1))
    return names


def get_codec(name: str | None) -> Codec | None:
    """Parse ``"zstd"`` / ``"zstd:7"``; ``None`` or ``""`` means no compression."""
    if not name:
        return None
    family, colon, level_text = str(name).partition(":")
    if family not in _LEVELS:
        raise CompressionError(
            f"{name} is not a supported compression algorithm; use one of {sorted(_LEVELS)}, optionally ':<level>'"
        )
    levels = _LEVELS[family]
    if levels is None:
        if colon:
            raise CompressionError(f"{name} is not a supported compression algorithm: {family} has no levels")
        _check_installed(family)
        return Codec(family, None)
    if not colon:
        _check_installed(family)
        return Codec(family, levels[2])
    if not level_text.isdigit() or not levels[0] <= int(level_text) <= levels[1]:
        raise CompressionError(
            f"{name} is not a supported compression algorithm: {family} levels are {levels[0]} to {levels[1]}"
        )
    _check_installed(family)
    return Codec(family, int(level_text))


def _check_installed(family: str) -> None:
    if family == "br":
        _brotli()
    elif family == "snappy":
        _snappy()
    elif family == "zstd":
        _zstd()


def _import(module: str, family: str) -> Any:
    try:
        return __import__(module)
    except ImportError as err:
        package, extra = _EXTRAS.get(family, (module, family))
        raise MissingDependencyError(
            f"compression {family!r} needs the {package!r} package: pip install 'mds-pipelines[{extra}]'"
        ) from err


def _zstd() -> Any:
    return _import("zstandard", "zstd")


def _brotli() -> Any:
    return _import("brotli", "br")


def _snappy() -> Any:
    return _import("cramjam", "snappy")


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    # Recording the content size in each frame header is what the reference's python-zstd
    # decompressor requires.
    _zstd()  # names the package to install when zstandard is missing
    import zstandard  # typed, unlike the module _zstd() returns

    return zstandard.ZstdCompressor(level=level, write_content_size=True)


def _zstd_compress(data: bytes, level: int | None) -> bytes:
    return _zstd_compressor(_level("zstd", level)).compress(data)


def _level(family: str, level: int | None) -> int:
    """A levelled family's level; get_codec always gives one, a Codec made by hand may not."""
    if level is None:
        raise CompressionError(f"compression {family!r} needs a level")
    return level


_FEED_BYTES = 1 << 18


def _zstd_decompress(data: bytes) -> bytes:
    # Shards may hold many concatenated frames (our writer compresses chunks as they fill). Input is
    # fed in bounded pieces so that finding where each frame ends never copies the rest of the data.
    view, pieces, position = memoryview(data), [], 0
    decompressor = _zstd().ZstdDecompressor()
    while True:
        frame = decompressor.decompressobj()
        while not frame.eof:
            if position >= len(view):
                raise CompressionError("zstd data is truncated: the last frame is incomplete")
            piece = view[position : position + _FEED_BYTES]
            pieces.append(frame.decompress(piece))
            position += len(piece)
        position -= len(frame.unused_data)
        if position >= len(view):
            return b"".join(pieces)


_COMPRESSORS: dict[str, Callable[[bytes, int | None], bytes]] = {
    "br": lambda data, level: _brotli().compress(data, quality=_level("br", level)),
    "bz2": lambda data, level: bz2.compress(data, _level("bz2", level)),
    # mtime=0 makes output reproducible; the reference stamps the current time.
    "gz": lambda data, level: gzip.compress(data, _level("gz", level), mtime=0),
    # The reference writes the raw snappy block format, not the framing format.
    "snappy": lambda data, level: bytes(_snappy().snappy.compress_raw(data)),
    "zstd": _zstd_compress,
}
_DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "br": lambda data: _brotli().decompress(data),
    "bz2": bz2.decompress,
    "gz": gzip.decompress,
    "snappy": lambda data: bytes(_snappy().snappy.decompress_raw(data)),
    "zstd": _zstd_decompress,
}
