"""What every column coder is: the scalar, image and ndarray coders all have this shape."""

from __future__ import annotations

from typing import Any, Protocol


class Coder(Protocol):
    """``name``, ``size`` (fixed byte size or ``None``), ``encode(obj) -> bytes`` and ``decode``.

    ``decode(buf, offset, size)`` reads ``size`` bytes of ``buf`` (bytes, an mmap or a memoryview)
    at ``offset``.
    """

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int | None: ...

    def encode(self, obj: Any) -> bytes: ...

    def decode(self, buf: Any, offset: int, size: int) -> Any: ...
