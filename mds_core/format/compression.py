"""Compression codecs by name: ``zstd``, ``zstd:7``, ``gz:9``, ``bz2``, ``br``, ``snappy``.

A codec is parsed once from its name. ``br`` and ``snappy`` need optional packages; asking for them
without the package installed names the extra to install.
"""

from __future__ import annotations

import bz2
import gzip
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import zstandard


@dataclass(frozen=True)
class Codec:
    """One compression family at one level. ``extension`` names the compressed shard files."""

    family: str
    level: int | None

    @property
    def extension(self) -> str:
        return self.family

    @property
    def concatenable(self) -> bool:
        """Whether compressed pieces can simply be concatenated (zstd frames, gzip members, bz2 streams)."""
        return self.family in ("zstd", "gz", "bz2")

    def compress(self, data: bytes) -> bytes:
        return _COMPRESSORS[self.family](data, self.level)

    def compressor(self) -> Callable[[bytes], bytes]:
        """``compress`` for many calls on one thread, reusing one compression context.

        A zstd context takes ~1 MB of workspace to set up; made anew for every ~112 KiB chunk, it
        sometimes doubled the writer's CPU time (when the allocator handed back fresh pages).
        """
        if self.family == "zstd":
            return _zstd_compressor(_level(self.family, self.level)).compress
        return self.compress

    def decompress(self, data: bytes) -> bytes:
        try:
            return _DECOMPRESSORS[self.family](data)
        except MissingDependencyError:
            raise
        except Exception as err:  # each library raises its own error type
            raise CompressionError(f"data does not decompress as {self.family}: {err}") from err

    def decompress_file(self, src: IO[bytes], dst: IO[bytes]) -> None:
        """Stream-decompress where the library allows it, so peak memory stays small."""
        try:
            if self.family == "zstd":
                _zstd().ZstdDecompressor().copy_stream(src, dst)
            elif self.family in ("gz", "bz2"):
                opener: Callable[..., Any] = gzip.open if self.family == "gz" else bz2.open
                with opener(src, "rb") as stream:
                    shutil.copyfileobj(stream, dst, _CHUNK)
            else:
                dst.write(self.decompress(src.read()))
        except (MissingDependencyError, CompressionError):
            raise
        except Exception as err:
            raise CompressionError(f"data does not decompress as {self.family}: {err}") from err


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
