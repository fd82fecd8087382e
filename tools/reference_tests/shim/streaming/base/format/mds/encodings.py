"""``streaming.base.format.mds.encodings``: the encoding functions, and the classes of its registry.

The reference's registry maps names to classes (``Int``, ``NDArray(dtype, shape)``, ...); mds_core's
maps them to coder objects (``get_coder``). Each class here is a coder by the reference's name,
with the reference's one-argument ``decode``.
"""

from __future__ import annotations

from typing import Any

from mds_core.format import (
    get_coder,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
)

__all__ = ["get_mds_encoded_size", "get_mds_encodings", "is_mds_encoding", "is_mds_encoding_safe"]
__all__ += ["mds_decode", "mds_encode"]


class Encoding:
    """A coder by its encoding name; ``size`` is its fixed size in bytes, or None."""

    encoding = ""

    def __init__(self) -> None:
        self._coder = get_coder(self.encoding)
        self.size = self._coder.size

    def encode(self, obj: Any) -> bytes:
        return self._coder.encode(obj)

    def decode(self, data: bytes) -> Any:
        return self._coder.decode(data, 0, len(data))


class NDArray(Encoding):
    """``NDArray()``, ``NDArray("uint8")`` or ``NDArray("uint8", (3, 4))``, as ``ndarray[:dtype[:shape]]``."""

    def __init__(self, dtype: str | None = None, shape: tuple[int, ...] | None = None) -> None:
        parts = ["ndarray", *([dtype] if dtype else []), *([",".join(map(str, shape))] if shape else [])]
        self.encoding = ":".join(parts)
        super().__init__()


_NAMES = {
    "Bytes": "bytes",
    "Str": "str",
    "Int": "int",
    "UInt8": "uint8",
    "UInt16": "uint16",
    "UInt32": "uint32",
    "UInt64": "uint64",
    "Int8": "int8",
    "Int16": "int16",
    "Int32": "int32",
    "Int64": "int64",
    "Float16": "float16",
    "Float32": "float32",
    "Float64": "float64",
    "StrInt": "str_int",
    "StrFloat": "str_float",
    "StrDecimal": "str_decimal",
    "PIL": "pil",
    "JPEG": "jpeg",
    "JPEGArray": "jpeg_array",
    "PNG": "png",
    "PILList": "list[pil]",
    "JPEGList": "list[jpeg]",
    "PNGList": "list[png]",
    "Pickle": "pkl",
    "JSON": "json",
}
for _class_name, _encoding in _NAMES.items():
    globals()[_class_name] = type(_class_name, (Encoding,), {"encoding": _encoding})
