"""Image coders: ``pil``, ``jpeg``, ``png``, ``list[pil|jpeg|png]`` and ``jpeg_array``.

Pillow is imported when an image column is first encoded or decoded, so datasets without images
never pay for it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from io import BytesIO
from typing import TYPE_CHECKING, Any

from mds_core.errors import DecodeError, EncodeError
from mds_core.format.coder import Coder

if TYPE_CHECKING:
    from PIL import Image

_U32 = struct.Struct("<I")
_PIL_HEAD = struct.Struct("<III")


def _image_module() -> Any:
    from PIL import Image

    return Image


def _require_image(obj: object, encoding: str) -> Image.Image:
    from PIL import Image

    if not isinstance(obj, Image.Image):
        raise EncodeError(f"encoding {encoding!r} needs a PIL image, got {type(obj).__name__}")
    return obj


def _open_image(data: bytes, encoding: str) -> Any:
    try:
        return _image_module().open(BytesIO(data))
    except Exception as err:  # Pillow raises several types for bad data
        raise DecodeError(f"{encoding!r} value is not a readable image: {err}") from err


@dataclass(frozen=True)
class PILCoder:
    """Raw pixels: ``u32 width, u32 height, u32 len(mode)``, the mode, then ``Image.tobytes()``."""

    name: str = "pil"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The image's size, mode and raw pixels."""
        image = _require_image(obj, self.name)
        mode = image.mode.encode("utf-8")
        return _PIL_HEAD.pack(image.width, image.height, len(mode)) + mode + image.tobytes()

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The image from its size, mode and raw pixels."""
        if size < _PIL_HEAD.size:
            raise DecodeError("'pil' value is shorter than its header")
        width, height, mode_len = _PIL_HEAD.unpack_from(buf, offset)
        if _PIL_HEAD.size + mode_len > size:
            raise DecodeError(f"'pil' value's mode ({mode_len} bytes) runs past its end ({size} bytes)")
        # Pillow allocates the whole image before it reads the pixels: a damaged width or height
        # would allocate gigabytes (and take seconds) first. Every mode takes at least a bit a pixel.
        if width * height > 8 * (size - _PIL_HEAD.size - mode_len):
            raise DecodeError(f"'pil' value of {width}x{height} pixels cannot fit in its {size} bytes")
        start = offset + _PIL_HEAD.size
        mode = bytes(buf[start : start + mode_len]).decode("utf-8", errors="replace")
        pixels = bytes(buf[start + mode_len : offset + size])
        try:
            return _image_module().frombytes(mode, (width, height), pixels)
        except Exception as err:
            raise DecodeError(f"'pil' value ({mode} {width}x{height}) does not decode: {err}") from err


@dataclass(frozen=True)
class SavedImageCoder:
    """``jpeg`` and ``png``: the image file bytes, decoded lazily with ``Image.open``."""

    name: str
    format: str
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """The image in this coder's format (an opened JPEG's own bytes, kept)."""
        image = _require_image(obj, self.name)
        filename = getattr(image, "filename", None)
        if self.format == "JPEG" and image.format == "JPEG" and filename:
            # The reference keeps an opened JPEG's original bytes rather than re-encoding it.
            try:
                with open(filename, "rb") as file:
                    return file.read()
            except OSError:
                pass
        out = BytesIO()
        image.save(out, format=self.format)
        return out.getvalue()

    def decode(self, buf: Any, offset: int, size: int) -> Any:
        """The image opened from its encoded bytes."""
        return _open_image(bytes(buf[offset : offset + size]), self.name)


def _pack_parts(parts: list[bytes]) -> bytes:
    return struct.pack(f"<I{len(parts)}I", len(parts), *map(len, parts)) + b"".join(parts)


def _unpack_parts(buf: Any, offset: int, size: int, encoding: str) -> list[bytes]:
    end = offset + size
    if size < 4:
        raise DecodeError(f"{encoding!r} value is shorter than its count")
    (count,) = _U32.unpack_from(buf, offset)
    start = offset + 4 + 4 * count
    if start > end:
        raise DecodeError(f"{encoding!r} value claims {count} elements but is only {size} bytes")
    sizes = struct.unpack_from(f"<{count}I", buf, offset + 4)
    if start + sum(sizes) != end:
        raise DecodeError(f"{encoding!r} element sizes do not add up to the value's {size} bytes")
    parts = []
    for part_size in sizes:
        parts.append(bytes(buf[start : start + part_size]))
        start += part_size
    return parts


@dataclass(frozen=True)
class ImageListCoder:
    """``list[pil|jpeg|png]``: ``u32 0`` (reserved), then count, sizes and elements."""

    element: Coder
    size: int | None = None

    @property
    def name(self) -> str:
        """``list[<element>]``."""
        return f"list[{self.element.name}]"

    def encode(self, obj: Any) -> bytes:
        """A list's elements, each encoded, behind their count and sizes."""
        if not isinstance(obj, list):
            raise EncodeError(f"encoding {self.name!r} needs a list, got {type(obj).__name__}")
        return _U32.pack(0) + _pack_parts([self.element.encode(item) for item in obj])

    def decode(self, buf: Any, offset: int, size: int) -> list[Any]:
        """The list of decoded elements."""
        if size < 4:
            raise DecodeError(f"{self.name!r} value is shorter than its header")
        parts = _unpack_parts(buf, offset + 4, size - 4, self.name)
        return [self.element.decode(part, 0, len(part)) for part in parts]


@dataclass(frozen=True)
class JPEGArrayCoder:
    """``jpeg_array``: already-encoded JPEG byte strings; count, sizes, elements, no placeholder."""

    name: str = "jpeg_array"
    size: int | None = None

    def encode(self, obj: Any) -> bytes:
        """A sequence of JPEG-encoded bytes, kept as they are, behind their count and sizes."""
        if isinstance(obj, (str, bytes)) or not hasattr(obj, "__len__"):
            raise EncodeError(f"encoding {self.name!r} needs a sequence of JPEG bytes, got {type(obj).__name__}")
        if not all(isinstance(item, (bytes, bytearray)) for item in obj):  # the reference takes bytearrays
            raise EncodeError(f"encoding {self.name!r} needs every element to be JPEG-encoded bytes")
        return _pack_parts(list(obj))

    def decode(self, buf: Any, offset: int, size: int) -> list[Any]:
        """The list of images opened from their JPEG bytes."""
        parts = _unpack_parts(buf, offset, size, self.name)
        if not parts:
            raise DecodeError(f"{self.name!r} value holds no images")
        return [_open_image(part, self.name) for part in parts]


_PIL = PILCoder()
_JPEG = SavedImageCoder("jpeg", "JPEG")
_PNG = SavedImageCoder("png", "PNG")

IMAGE_CODERS: dict[str, Coder] = {
    "pil": _PIL,
    "jpeg": _JPEG,
    "png": _PNG,
    "list[pil]": ImageListCoder(_PIL),
    "list[jpeg]": ImageListCoder(_JPEG),
    "list[png]": ImageListCoder(_PNG),
    "jpeg_array": JPEGArrayCoder(),
    "jpegarray": JPEGArrayCoder("jpegarray"),
}
