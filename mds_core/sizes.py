"""Sizes for people.

``"64mb"`` -> 67108864 (powers of 1024, as the reference's ``bytes_to_int``), and 67108864 -> ``"64.0 MiB"`` for every
report and command.
"""

from __future__ import annotations

import re

from mds_core.errors import SizeError, WriterError

_BYTE_SUFFIXES = {"b": 0, "kb": 1, "mb": 2, "gb": 3, "tb": 4, "pb": 5, "eb": 6, "zb": 7, "yb": 8}
_SIZE_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)$")


def bytes_to_int(size: int | float | str) -> int:
    """Parse ``1024``, ``1024.7``, ``"1024"``, ``"1.5kb"`` or ``"64MB"`` into a byte count.

    Raises:
        SizeError: (a ``ValueError``, as the reference raised) for anything else; the message quotes it. Each
            caller names the argument: ``parse_size_limit`` as a ``WriterError``, ``cache_limit`` as a
            ``ConfigurationError``.
    """
    if isinstance(size, bool):
        raise SizeError(f"a size must be a number or a string like '64mb', got {size!r}")
    if isinstance(size, (int, float)):
        return int(size)
    if not isinstance(size, str):
        raise SizeError(f"a size must be a number or a string like '64mb', got {type(size).__name__}")
    match = _SIZE_RE.match(size.strip().lower())
    if not match or (match.group(2) not in _BYTE_SUFFIXES and match.group(2)):
        raise SizeError(
            f"Unsupported value/suffix {size!r}: a size is bytes or a number with a suffix {sorted(_BYTE_SUFFIXES)}, e.g. '64mb'"
        )
    number, suffix = match.groups()
    return int(float(number) * 1024 ** _BYTE_SUFFIXES[suffix or "b"])


def parse_size_limit(size_limit: int | float | str | None) -> int | None:
    """A writer's shard size limit in bytes; any falsy value means no limit."""
    if not size_limit:
        return None
    try:
        limit = bytes_to_int(size_limit)
    except SizeError as err:  # a writer argument: WriterError, as for the writer's other arguments
        raise WriterError(f"size_limit: {err}") from None
    if limit < 0 or limit >= 1 << 32:
        # The reference's wording first (code written against it matches on it), then the rule.
        bound = "greater than zero" if limit < 0 else "less than 2**32"
        raise WriterError(
            f"`size_limit` must be {bound}, instead, found as {size_limit!r}: it must be between 0 and 4 GiB "
            "(exclusive), as a shard's offsets are 32-bit"
        )
    return limit or None


def format_bytes(num_bytes: int | None) -> str:
    """``"512 B"``, ``"1.5 KiB"``, ``"64.0 MiB"``, ``"1,024.0 TiB"``; ``"-"`` for None."""
    if num_bytes is None:
        return "-"
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"
