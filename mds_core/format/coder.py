"""What every column coder is: the scalar, image and ndarray coders all have this shape."""

from __future__ import annotations

from typing import Any, Protocol


class Coder(Protocol):
    """``name``, ``size`` (fixed byte size or ``None``), ``encode(obj) -> bytes`` and ``decode``.

    ``decode(buf, offset, size)`` reads ``size`` bytes of ``buf`` (bytes, an mmap or a memoryview)
    at ``offset``.
    """

    @property
    def name(self) -> str:
        """The encoding's name as ``index.json`` spells it."""

    @property
    def size(self) -> int | None:
        """The encoded size in bytes of every value, or None when values vary."""

    def encode(self, obj: Any) -> bytes:
        """One value's bytes."""

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The value whose ``size`` bytes start at ``offset`` in ``buf``."""
