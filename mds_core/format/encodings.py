"""Column encodings by name: parse an encoding string once into a coder object.

``get_coder("ndarray:int16:2,3")`` returns an object with ``name``, ``size`` (fixed byte size or
``None``), ``encode(obj) -> bytes`` and ``decode(buf, offset, size)``. The module-level functions
mirror ``streaming.base.format.mds.encodings`` for code that calls them directly.
"""

from __future__ import annotations

from typing import Any

from mds_core.errors import UnknownEncodingError
from mds_core.format.coder import Coder as Coder  # re-exported: the type get_coder returns
from mds_core.format.images import IMAGE_CODERS
from mds_core.format.ndarray import NDArrayCoder
from mds_core.format.scalars import SCALAR_CODERS

UNSAFE_ENCODINGS = frozenset({"pkl"})


_CODERS: dict[str, Coder] = {**SCALAR_CODERS, **IMAGE_CODERS, "ndarray": NDArrayCoder()}


def get_mds_encodings() -> set[str]:
    """Every encoding name accepted without a configuration suffix."""
    return set(_CODERS)


def get_coder(encoding: str) -> Coder:
    """Parse ``encoding`` into its coder, or raise ``UnknownEncodingError`` naming the choices."""
    if not isinstance(encoding, str):
        raise UnknownEncodingError(f"an encoding must be a string, got {type(encoding).__name__}")
    name, colon, config = encoding.partition(":")
    if colon and name == "ndarray":
        return NDArrayCoder.from_config(config)
    if not colon and name in _CODERS:
        return _CODERS[name]
    hint = " (only 'ndarray' takes a ':' configuration)" if colon and name in _CODERS else ""
    raise UnknownEncodingError(
        f"unknown encoding {encoding!r}{hint}; supported: {', '.join(sorted(_CODERS))}, "
        "ndarray:<dtype>, ndarray:<dtype>:<d0>,<d1>,..."
    )


def is_mds_encoding(encoding: str) -> bool:
    """Whether ``encoding`` names an encoding this library reads and writes."""
    try:
        get_coder(encoding)
    except UnknownEncodingError:
        return False
    return True


def is_mds_encoding_safe(encoding: str) -> bool:
    """Whether decoding ``encoding`` runs no code (``pkl`` does)."""
    return encoding not in UNSAFE_ENCODINGS


def get_mds_encoded_size(encoding: str) -> int | None:
    """The fixed size of a value in ``encoding``, or None when values vary."""
    return get_coder(encoding).size


def mds_encode(encoding: str, obj: Any) -> bytes:
    """Encode one value; ``bytes`` pass through unchanged, as in the reference."""
    return obj if isinstance(obj, bytes) else get_coder(encoding).encode(obj)


def mds_decode(encoding: str, data: bytes) -> Any:
    """Decode one value's bytes."""
    return get_coder(encoding).decode(data, 0, len(data))
