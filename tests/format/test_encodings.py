"""Column encodings: exact bytes from the spec's verified examples, and clear errors for bad values."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from PIL import Image

from mds_core.errors import DecodeError, EncodeError, UnknownEncodingError
from mds_core.format.encodings import (
    get_coder,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
)

ALL_NAMES = {
    *"bytes str int str_int str_float str_decimal pkl json ndarray float16 float32 float64".split(),
    *(f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64)),
    *"pil jpeg png jpeg_array jpegarray list[pil] list[jpeg] list[png]".split(),
}


def test_the_registry_is_the_references_and_only_pkl_is_unsafe() -> None:
    assert get_mds_encodings() == ALL_NAMES
    assert not is_mds_encoding_safe("pkl")
    assert all(is_mds_encoding_safe(name) for name in ALL_NAMES - {"pkl"})


@pytest.mark.parametrize(
    ("encoding", "value", "hex_bytes"),
    [
        ("int8", -2, "fe"),
        ("uint16", 513, "0102"),
        ("float16", 1.5, "003e"),
        ("int", -2, "feffffffffffffff"),
        ("ndarray", np.array([0, 1, 2], np.float32), "220403000000000000803f00000040"),
        ("ndarray:int32", np.zeros((2, 2), np.int32), "080202" + "00" * 16),
    ],
)
def test_spec_examples(encoding: str, value: object, hex_bytes: str) -> None:
    assert mds_encode(encoding, value).hex() == hex_bytes


def test_ndarray_shape_width_grows_with_the_largest_dimension() -> None:
    data = mds_encode("ndarray", np.zeros((2, 300), np.uint8))
    assert data[:6].hex() == "0809" + "0200" + "2c01"
    big = mds_encode("ndarray", np.zeros(70000, np.uint8))
    assert big[:6].hex() == "08" + "06" + (70000).to_bytes(4, "little").hex()


def test_json_matches_python_defaults() -> None:
    value = {"b": [1, 2.5, None, True], "a": "é"}
    assert mds_encode("json", value) == b'{"b": [1, 2.5, null, true], "a": "\\u00e9"}'
    assert mds_decode("json", mds_encode("json", np.arange(3))) == [0, 1, 2]


def test_pil_layout() -> None:
    image = Image.new("RGB", (2, 1), (255, 0, 0))
    assert mds_encode("pil", image).hex() == "020000000100000003000000524742ff0000ff0000"
    two = mds_encode("list[pil]", [image, Image.new("L", (1, 1))])
    assert two[:16].hex() == "0000000002000000150000000e000000"


def test_jpeg_array_layout_and_empty_decode() -> None:
    jpeg = mds_encode("jpeg", Image.new("RGB", (4, 4), (10, 20, 30)))
    data = mds_encode("jpeg_array", [jpeg, jpeg])
    assert data[:12] == (2).to_bytes(4, "little") + len(jpeg).to_bytes(4, "little") * 2
    assert [im.size for im in mds_decode("jpegarray", data)] == [(4, 4), (4, 4)]
    with pytest.raises(DecodeError, match="no images"):
        mds_decode("jpeg_array", (0).to_bytes(4, "little"))


@pytest.mark.parametrize(
    ("encoding", "value"),
    [
        ("str_int", -12345678901234567890),
        ("str_float", 1e-05),
        ("str_float", float("inf")),
        ("str_decimal", Decimal("1.10")),
        ("str", "ünïcode ✓"),
        ("bytes", b"\x00\x01"),
        ("pkl", {"a": (1, 2), "b": {3}}),
        ("int", 2**63 - 1),
    ],
)
def test_round_trip_keeps_value_and_type(encoding: str, value: object) -> None:
    decoded = mds_decode(encoding, mds_encode(encoding, value))
    assert decoded == value and type(decoded) is type(value)


def test_numbers_decode_to_numpy_scalars() -> None:
    for name in ("int8", "uint64", "float16", "float64"):
        decoded = mds_decode(name, mds_encode(name, 3))
        assert decoded.dtype == np.dtype(name) and decoded == 3
    nan = mds_decode("float32", mds_encode("float32", float("nan")))
    assert np.isnan(nan) and nan.dtype == np.float32


def test_fixed_sizes() -> None:
    assert get_mds_encoded_size("ndarray:int16:2,3") == 12
    assert get_mds_encoded_size("int") == 8
    assert get_mds_encoded_size("ndarray:int16") is None
    assert get_mds_encoded_size("str") is None


@pytest.mark.parametrize(
    "encoding",
    ["foo", "str:x", "foo:x", "ndarray::2,3", "ndarray:bool", "ndarray:int16:0", "ndarray:int16:2,x", "", "list[str]"],
)
def test_unknown_encodings_raise(encoding: str) -> None:
    assert not is_mds_encoding(encoding)
    with pytest.raises(UnknownEncodingError) as info:
        get_coder(encoding)
    assert isinstance(info.value, TypeError)  # what the reference's writer raised


@pytest.mark.parametrize(
    ("encoding", "value", "message"),
    [
        ("str", 5, "needs a str, got int"),
        ("int", "5", "needs an int, got str"),
        ("int", 2**63, "does not fit"),
        ("int8", 300, "cannot be stored as int8"),
        ("uint8", -1, "cannot be stored as uint8"),
        ("int16", "1", "needs a number"),
        ("str_int", True, "needs a int, got bool"),
        ("str_float", 1, "needs a float, got int"),
        ("str_decimal", 1.5, "needs a Decimal"),
        ("json", {1, 2}, "not JSON-serialisable"),
        ("pil", b"x".decode(), "needs a PIL image"),
        ("list[pil]", (1,), "needs a list"),
        ("jpeg_array", [Image.new("L", (1, 1))], "JPEG-encoded bytes"),
        ("ndarray", [1, 2], "needs a numpy ndarray"),
        ("ndarray", np.array(5), r"cannot store an array of shape \(\)"),
        ("ndarray", np.zeros(0), r"cannot store an array of shape \(0,\)"),
        ("ndarray", np.zeros(2, bool), "dtype bool is not supported"),
        ("ndarray:int32", np.zeros(2, np.int64), "needs dtype int32, got int64"),
        ("ndarray:int32:3", np.zeros(2, np.int32), r"needs shape \(3,\), got \(2,\)"),
    ],
)
def test_wrong_values_raise_encode_error(encoding: str, value: object, message: str) -> None:
    with pytest.raises(EncodeError, match=message):
        get_coder(encoding).encode(value)


@pytest.mark.parametrize("encoding", ["ndarray", "ndarray:int32", "ndarray:int32:3"])
def test_big_endian_arrays_are_stored_little_endian(encoding: str) -> None:
    big = np.array([0, 1, 2], dtype=">i4")
    decoded = mds_decode(encoding, mds_encode(encoding, big))
    assert decoded.tolist() == [0, 1, 2] and decoded.dtype == np.dtype("<i4")


def test_non_contiguous_arrays_round_trip() -> None:
    arr = np.arange(12, dtype=np.float64).reshape(3, 4).T
    assert np.array_equal(mds_decode("ndarray", mds_encode("ndarray", arr)), arr)


def test_decoded_arrays_are_writable_and_never_write_into_the_encoded_bytes() -> None:
    data = mds_encode("ndarray:uint16:4", np.arange(4, dtype=np.uint16))
    arr = mds_decode("ndarray:uint16:4", data)
    assert arr.flags.writeable and arr.flags.owndata  # read-only bytes: a copy (torch warns on read-only)
    arr[0] = 7
    assert mds_decode("ndarray:uint16:4", data).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("encoding", "data", "message"),
    [
        ("ndarray", bytes([99, 4, 1, 0]), "unknown dtype code"),
        ("ndarray", bytes([8, 4, 5, 0]), "needs 5 bytes but has 1"),
        ("ndarray", bytes([8, 8, 1]), "invalid shape header"),
        ("ndarray:int16:2", b"\x00", "needs 4 bytes but has 1"),
        ("str_int", b"abc", "not a valid str_int"),
        ("json", b"{", "does not parse"),
        ("str", b"\xff", "not valid UTF-8"),
        ("list[png]", b"\x00\x00\x00\x00\x05\x00\x00\x00", "claims 5 elements"),
        ("jpeg", b"not an image", "not a readable image"),
        ("pil", b"\x01", "shorter than its header"),
    ],
)
def test_bad_bytes_raise_decode_error(encoding: str, data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        mds_decode(encoding, data)


def test_jpeg_keeps_the_original_file_bytes(tmp_path) -> None:
    path = tmp_path / "x.jpg"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(path, quality=95)
    with Image.open(path) as image:
        assert mds_encode("jpeg", image) == path.read_bytes()


def test_png_round_trip() -> None:
    image = Image.new("RGBA", (3, 2), (1, 2, 3, 4))
    decoded = mds_decode("png", mds_encode("png", image))
    assert decoded.mode == "RGBA" and decoded.tobytes() == image.tobytes()
