"""Coders for scalars and text: ``bytes``, ``str``, ``int``, fixed-width numbers, ``str_*``, ``json``, ``pkl``.

Every coder has ``size`` (bytes when fixed, else ``None``), ``encode(obj) -> bytes`` and
``decode(buf, offset, size)``, which reads ``size`` bytes of ``buf`` (bytes or an mmap) at ``offset``.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar, cast

import numpy as np

from mds_core.errors import DecodeError, EncodeError
from mds_core.format.coder import Coder

_INT64 = struct.Struct("<q")
_T = TypeVar("_T")


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _require(obj: object, kind: type[_T], encoding: str) -> _T:
    """``obj`` when it is a ``kind`` (a bool is not an int here), else an EncodeError."""
    if not isinstance(obj, kind) or (kind is int and isinstance(obj, bool)):
        raise EncodeError(f"encoding {encoding!r} needs a {kind.__name__}, got {_type_name(obj)}")
    return obj


@dataclass(frozen=True)
class BytesCoder:
    """``bytes``: the value as it is."""

    name: str = "bytes"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The bytes themselves."""
        return _require(obj, bytes, self.name)

    def decode(self, buf: Any, offset: int, size: int) -> bytes:
        """A copy of the value's bytes."""
        # A slice of bytes or of a map is bytes already (bytes() returns it as is); of a memoryview, a copy.
        return bytes(buf[offset : offset + size])

    def decode_spans(self, buf: Any, starts: list[int], ends: list[int]) -> list[bytes]:
        """Copies of ``buf[start:end]`` for many spans, for ``Schema.decode_block``: no call per value."""
        if isinstance(buf, memoryview):  # its slices are views
            return [bytes(buf[start:end]) for start, end in zip(starts, ends)]
        return [buf[start:end] for start, end in zip(starts, ends)]  # a map's or bytes' slices are copies already


@dataclass(frozen=True)
class StrCoder:
    """``str``: UTF-8 text."""

    name: str = "str"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The text in UTF-8."""
        return _require(obj, str, self.name).encode("utf-8")

    def decode(self, buf: Any, offset: int, size: int) -> str:
        """The text, refused when it is not valid UTF-8."""
        try:
            return str(buf[offset : offset + size], "utf-8")  # any buffer: bytes, a map, a memoryview
        except UnicodeDecodeError as err:
            raise DecodeError(f"'str' value is not valid UTF-8: {err}") from err

    def decode_spans(self, buf: Any, starts: list[int], ends: list[int]) -> list[str]:
        """The texts at many spans of ``buf``, for ``Schema.decode_block``: no call per value."""
        try:
            return [str(buf[start:end], "utf-8") for start, end in zip(starts, ends)]
        except UnicodeDecodeError as err:
            raise DecodeError(f"'str' value is not valid UTF-8: {err}") from err


@dataclass(frozen=True)
class IntCoder:
    """``int``: a Python int stored as little-endian int64, decoded back to a Python int."""

    name: str = "int"
    size: int | None = 8

    def encode(self, obj: Any) -> bytes:
        """The int as 8 little-endian bytes, refused out of the int64 range."""
        if not isinstance(obj, (int, np.integer)):
            raise EncodeError(f"encoding 'int' needs an int, got {_type_name(obj)}")
        try:
            return _INT64.pack(obj)
        except struct.error as err:
            raise EncodeError(f"{obj} does not fit in the int64 of encoding 'int'") from err

    def decode(self, buf: Any, offset: int, size: int) -> int:
        """The int from its 8 bytes."""
        value: int = _INT64.unpack_from(buf, offset)[0]  # "<q" unpacks one int
        return value

    def decode_many(self, u8: np.ndarray, starts: np.ndarray) -> list[int]:
        """Values at many offsets of a uint8 view, as Python ints, in one gather."""
        return u8[starts[:, None] + np.arange(8)].view("<i8").ravel().tolist()


@dataclass(frozen=True)
class NumberCoder:
    """``int8`` ... ``float64``: a number cast through numpy, decoded to a numpy scalar."""

    name: str
    dtype: np.dtype

    @property
    def size(self) -> int:
        """The numpy dtype's item size."""
        return self.dtype.itemsize

    def encode(self, obj: Any) -> bytes:
        """The number in the dtype's little-endian bytes."""
        try:
            # struct packs in-range ints and finite floats exactly as numpy's cast does, ~10x faster.
            return _NUMBER_STRUCTS[self.name].pack(obj)
        except (struct.error, OverflowError, TypeError):
            return self._encode_with_numpy(obj)

    def _encode_with_numpy(self, obj: Any) -> bytes:
        if isinstance(obj, (str, bytes)) or (not np.isscalar(obj) and not isinstance(obj, np.generic)):
            raise EncodeError(f"encoding {self.name!r} needs a number, got {_type_name(obj)}")
        try:
            # The reference casts with numpy (np.int8(obj)), so float inputs truncate and
            # out-of-range floats become inf; keep those semantics.
            with np.errstate(over="ignore"):
                return np.asarray(self.dtype.type(obj)).astype(self.dtype).tobytes()
        except (OverflowError, ValueError, TypeError) as err:
            raise EncodeError(f"{obj!r} cannot be stored as {self.name}: {err}") from err

    def decode(self, buf: Any, offset: int, size: int) -> np.generic:
        """The numpy scalar, bit for bit."""
        # A 0-d view then [()] copies the bits exactly (NaN payloads too), faster than frombuffer.
        # numpy's stubs type indexing with () as an array; on a 0-d array it gives the scalar.
        return cast(np.generic, np.ndarray((), self.dtype, buf, offset)[()])

    def decode_many(self, u8: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Values at many offsets of a uint8 view, as one array whose items are numpy scalars."""
        return u8[starts[:, None] + np.arange(self.dtype.itemsize)].view(self.dtype).ravel()


@dataclass(frozen=True)
class TextNumberCoder:
    """``str_int``, ``str_float`` and ``str_decimal``: a number stored as its decimal text."""

    name: str
    kind: type

    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The number's decimal text, in ASCII."""
        _require(obj, self.kind, self.name)
        text = float.__repr__(obj) if self.kind is float else str(obj)
        return text.encode("ascii")

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The number parsed from its decimal text."""
        text = bytes(buf[offset : offset + size]).decode("ascii", errors="replace")
        try:
            return self.kind(text)
        except (ValueError, InvalidOperation) as err:
            raise DecodeError(f"{text!r} is not a valid {self.name} value") from err


@dataclass(frozen=True)
class JSONCoder:
    """``json``: any JSON-serialisable value (numpy arrays as lists), as UTF-8 JSON text."""

    name: str = "json"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The value as UTF-8 JSON text."""
        if isinstance(obj, np.ndarray):
            obj = obj.tolist()
        try:
            return json.dumps(obj).encode("utf-8")
        except (TypeError, ValueError) as err:
            raise EncodeError(f"value is not JSON-serialisable: {err}") from err

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The value parsed from its JSON text."""
        try:
            return json.loads(bytes(buf[offset : offset + size]))
        except (ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
            raise DecodeError(f"'json' value does not parse: {err}") from err


@dataclass(frozen=True)
class PickleCoder:
    """``pkl``: arbitrary objects. Unsafe to read from untrusted data, so readers gate it."""

    name: str = "pkl"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The value pickled."""
        try:
            return pickle.dumps(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise EncodeError(f"value cannot be pickled: {err}") from err

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The value unpickled (this runs code the data chooses: read only trusted data)."""
        try:
            return pickle.loads(bytes(buf[offset : offset + size]))
        except Exception as err:  # unpickling can raise almost anything
            raise DecodeError(f"'pkl' value does not unpickle: {err}") from err


NUMBER_DTYPES = {
    name: np.dtype(name) if sys.byteorder == "little" else np.dtype(name).newbyteorder("<")
    for name in (
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
}

_NUMBER_STRUCTS = {
    name: struct.Struct(
        "<"
        + {"int": "bhiq", "uint": "BHIQ", "float": "?efd"}[name.rstrip("0123456789")][
            {1: 0, 2: 1, 4: 2, 8: 3}[dtype.itemsize]
        ]
    )
    for name, dtype in NUMBER_DTYPES.items()
}

SCALAR_CODERS: dict[str, Coder] = {
    "bytes": BytesCoder(),
    "str": StrCoder(),
    "int": IntCoder(),
    "str_int": TextNumberCoder("str_int", int),
    "str_float": TextNumberCoder("str_float", float),
    "str_decimal": TextNumberCoder("str_decimal", Decimal),
    "json": JSONCoder(),
    "pkl": PickleCoder(),
    **{name: NumberCoder(name, dtype) for name, dtype in NUMBER_DTYPES.items()},
}
