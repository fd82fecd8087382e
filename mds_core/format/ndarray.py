"""The ``ndarray`` coder in its three forms: ``ndarray``, ``ndarray:<dtype>``, ``ndarray:<dtype>:<shape>``.

Layout (pieces present only when the encoding string does not fix them)::

    [dtype code: u8] [shape byte: u8 = ndim << 2 | width code] [shape: ndim x width] [values, C order, LE]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mds_core.errors import DecodeError, EncodeError, UnknownEncodingError

DTYPE_CODES = {
    "uint8": 8,
    "int8": 9,
    "uint16": 16,
    "int16": 17,
    "float16": 18,
    "uint32": 32,
    "int32": 33,
    "float32": 34,
    "uint64": 64,
    "int64": 65,
    "float64": 66,
}


def _little_endian(name: str) -> np.dtype:
    # On little-endian hosts np.dtype(name) is the canonical object arrays carry, so `is` matches.
    return np.dtype(name) if sys.byteorder == "little" else np.dtype(name).newbyteorder("<")


CODE_DTYPES = {code: _little_endian(name) for name, code in DTYPE_CODES.items()}
# dtype.num is a cheap int; several type characters (e.g. 'l' and 'q') share one dtype name.
NUM_CODES = {
    np.dtype(char).num: DTYPE_CODES[np.dtype(char).name]
    for char in np.typecodes["AllInteger"] + np.typecodes["AllFloat"]
    if np.dtype(char).name in DTYPE_CODES
}
SHAPE_WIDTHS: list[np.dtype[np.unsignedinteger[Any]]] = [
    np.dtype("<u1"),
    np.dtype("<u2"),
    np.dtype("<u4"),
    np.dtype("<u8"),
]
MAX_NDIM = 63


@dataclass(frozen=True)
class NDArrayCoder:
    """The ``ndarray`` encodings: a numpy array, with its dtype and shape fixed by the name or stored with it."""

    dtype: np.dtype | None = None
    shape: tuple[int, ...] | None = None

    @classmethod
    def from_config(cls, config: str) -> NDArrayCoder:
        """Parse the part after ``ndarray:``, e.g. ``""``, ``"int16"`` or ``"int16:2,3"``."""
        dtype_name, _, shape_text = config.partition(":")
        if not dtype_name:
            if shape_text:
                raise UnknownEncodingError(
                    f"'ndarray:{config}': a shape needs a dtype too, e.g. 'ndarray:uint8:{shape_text}'"
                )
            return cls()
        if dtype_name not in DTYPE_CODES:
            raise UnknownEncodingError(
                f"'ndarray:{config}': unknown dtype {dtype_name!r}; use one of {sorted(DTYPE_CODES)}"
            )
        dtype = CODE_DTYPES[DTYPE_CODES[dtype_name]]
        if not shape_text:
            return cls(dtype)
        try:
            shape = tuple(int(dim) for dim in shape_text.split(","))
        except ValueError:
            shape = ()
        if not shape or min(shape) < 1 or len(shape) > MAX_NDIM:
            raise UnknownEncodingError(
                f"'ndarray:{config}': the shape must be 1 to {MAX_NDIM} comma-separated integers >= 1"
            )
        return cls(dtype, shape)

    @property
    def name(self) -> str:
        """``ndarray``, then the fixed dtype and shape, colon-separated."""
        parts = ["ndarray"]
        if self.dtype is not None:
            parts.append(self.dtype.name)
        if self.shape is not None:
            parts.append(",".join(map(str, self.shape)))
        return ":".join(parts)

    @property
    def size(self) -> int | None:
        """The encoded size when dtype and shape are both fixed, else None."""
        if self.dtype is None or self.shape is None:
            return None
        return math.prod(self.shape) * self.dtype.itemsize

    def encode(self, obj: Any) -> bytes:
        """The array's bytes, behind the dtype and shape the name does not fix."""
        arr = obj if self._is_plain_match(obj) else self._checked_array(obj)
        head = b""
        if self.dtype is None:
            head += bytes([NUM_CODES[arr.dtype.num]])
        if self.shape is None:
            head += _encode_shape(arr.shape)
        # tobytes() writes the logical C-order values for any memory layout.
        return head + arr.tobytes()

    def _is_plain_match(self, obj: Any) -> bool:
        """The common case, checked cheaply: a little-endian array of an accepted dtype and shape."""
        if type(obj) is not np.ndarray:
            return False
        dtype = obj.dtype
        if self.dtype is not None:
            if dtype is not self.dtype:
                return False
        elif dtype.num not in NUM_CODES or dtype.byteorder == ">":
            return False
        return obj.shape == self.shape if self.shape is not None else obj.ndim > 0 and obj.size > 0

    def _checked_array(self, obj: Any) -> np.ndarray:
        if not isinstance(obj, np.ndarray):
            raise EncodeError(f"encoding {self.name!r} needs a numpy ndarray, got {type(obj).__name__}")
        if obj.ndim == 0 or obj.size == 0:
            # The reference's wording first: code written against it matches on it.
            what = "a scalar with NDArray encoding" if obj.ndim == 0 else "a numpy array with 0 elements"
            raise EncodeError(
                f"Attempting to encode {what}: encoding {self.name!r} cannot store an array of shape {obj.shape}"
            )
        if obj.dtype.name not in DTYPE_CODES:
            raise EncodeError(
                f"encoding {self.name!r}: dtype {obj.dtype} is not supported; use one of {sorted(DTYPE_CODES)}"
            )
        if self.dtype is not None and obj.dtype.name != self.dtype.name:
            raise EncodeError(f"encoding {self.name!r} needs dtype {self.dtype.name}, got {obj.dtype.name}")
        if self.shape is not None and obj.shape != self.shape:
            raise EncodeError(f"encoding {self.name!r} needs shape {self.shape}, got {obj.shape}")
        # The reference writes native order under a little-endian code; store big-endian input as LE.
        return obj.astype(obj.dtype.newbyteorder("<"), copy=False)

    def decode_views(self, u8: np.ndarray, starts: np.ndarray, writable: bool = True) -> list[np.ndarray]:
        """Fixed dtype and shape only: the values at many offsets of ``u8`` whose sizes are already checked.

        Half the cost of ``decode`` per value (no header or size checks), for ``Schema.decode_block``.
        Writable ``u8`` is a block the caller owns (in-order reading): the values view it. Read-only
        ``u8`` is shared (a shard's memory map): the values are gathered into one new array, one copy
        for the whole column, so every value is writable and a write never reaches the shard; with
        ``writable=False`` they are read-only views of it instead, for a reader that never writes.
        """
        shape, dtype = self.shape, self.dtype
        if shape is None or dtype is None:
            raise DecodeError(f"decode_views needs an encoding with a fixed dtype and shape, not {self.name!r}")
        if u8.flags.writeable or not writable:
            view = np.ndarray
            return [view(shape, dtype, u8, start) for start in starts.tolist()]
        size = math.prod(shape) * dtype.itemsize
        # Every window of ``size`` bytes as a row: fancy indexing copies the chosen rows with memcpy.
        windows = as_strided(u8, (max(0, len(u8) - size + 1), size), (1, 1), writeable=False)
        return list(windows[starts].view(dtype).reshape((len(starts), *shape)))

    def decode(self, buf: Any, offset: int, size: int, writable: bool = True) -> np.ndarray:
        """One value: a view of ``buf`` if it is writable (a block the caller owns), else a copy.

        Never a read-only array unless ``writable`` is False: torch warns on those, and a shared buffer
        must not be written.
        """
        end = offset + size
        dtype = self.dtype
        if dtype is None:
            if size < 1 or buf[offset] not in CODE_DTYPES:
                raise DecodeError(f"ndarray value has an unknown dtype code at byte {offset}")
            dtype = CODE_DTYPES[buf[offset]]
            offset += 1
        shape = self.shape
        if shape is None:
            shape, offset = _decode_shape(buf, offset, end)
        count = math.prod(shape)
        if count * dtype.itemsize != end - offset:
            raise DecodeError(
                f"ndarray value of dtype {dtype.name} and shape {shape} needs {count * dtype.itemsize} "
                f"bytes but has {end - offset}"
            )
        value = np.ndarray(shape, dtype, buf, offset)
        return value.copy() if writable and not value.flags.writeable else value

    def view(self, buf: Any, offset: int, size: int) -> np.ndarray:
        """One value as a view of ``buf``, read-only where ``buf`` is: no copy, for a reader that never writes."""
        return self.decode(buf, offset, size, writable=False)


def _encode_shape(shape: tuple[int, ...]) -> bytes:
    if len(shape) > MAX_NDIM:
        raise EncodeError(f"ndarray has {len(shape)} dimensions; at most {MAX_NDIM} are supported")
    largest = max(shape)
    width_code = 0 if largest < 1 << 8 else 1 if largest < 1 << 16 else 2 if largest < 1 << 32 else 3
    return bytes([len(shape) << 2 | width_code]) + np.array(shape, SHAPE_WIDTHS[width_code]).tobytes()


def _decode_shape(buf: Any, offset: int, end: int) -> tuple[tuple[int, ...], int]:
    if offset >= end:
        raise DecodeError("ndarray value ends before its shape")
    ndim, width = buf[offset] >> 2, SHAPE_WIDTHS[buf[offset] & 3]
    offset += 1
    shape_end = offset + ndim * width.itemsize
    if ndim == 0 or shape_end > end:
        raise DecodeError(f"ndarray value has an invalid shape header ({ndim} dimensions)")
    shape = tuple(int(dim) for dim in np.frombuffer(buf, width, ndim, offset))
    return shape, shape_end
