"""``streaming.base.compression``: the functions, and a class per codec family over mds_core's codecs."""

from __future__ import annotations

from mds_core.errors import CompressionError
from mds_core.format import get_codec, get_compressions

__all__ = ["Brotli", "Bzip2", "Gzip", "Snappy", "Zstandard", "compress", "decompress", "get_compressions"]
__all__ += ["get_compression_extension", "is_compression"]


class _Family:
    """``Zstandard()`` or ``Zstandard(7)``: mds_core's codec for ``zstd`` / ``zstd:7``."""

    family = ""

    def __init__(self, level: int | None = None) -> None:
        self._codec = get_codec(self.family if level is None else f"{self.family}:{level}")
        self.level = self._codec.level if self._codec else None
        self.extension = self._codec.extension if self._codec else self.family

    @property
    def levels(self) -> list[int]:
        prefix = f"{self.family}:"
        return sorted(int(name[len(prefix) :]) for name in get_compressions() if name.startswith(prefix))

    def compress(self, data: bytes) -> bytes:
        return self._codec.compress(data) if self._codec else data

    def decompress(self, data: bytes) -> bytes:
        return self._codec.decompress(data) if self._codec else data


class Brotli(_Family):
    family = "br"


class Bzip2(_Family):
    family = "bz2"


class Gzip(_Family):
    family = "gz"


class Snappy(_Family):
    family = "snappy"


class Zstandard(_Family):
    family = "zstd"


def is_compression(algo: str | None) -> bool:
    try:
        get_codec(algo)
    except CompressionError:
        return False
    return True


def get_compression_extension(algo: str) -> str:
    codec = get_codec(algo)
    return codec.extension if codec else ""


def compress(algo: str | None, data: bytes) -> bytes:
    codec = get_codec(algo)
    return codec.compress(data) if codec else data


def decompress(algo: str | None, data: bytes) -> bytes:
    codec = get_codec(algo)
    return codec.decompress(data) if codec else data
