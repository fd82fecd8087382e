"""Sample previews: a small versioned shard set written with MDSWriter, drawn as grid PNGs."""

from __future__ import annotations

import base64
import io
import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mds_core import MDSWriter
from mds_core.errors import ConfigurationError
from mds_core.versions import ShardSet
from pipelines.previews import GAP, GAP_SHADE, grid_png, picture_columns, sample_preview
from testsupport.s3 import MotoServer, object_gets

COLUMNS = {
    "id": "int64",
    "label": "str",
    "pixels": "ndarray:int8",
    "glyph": "ndarray:float32:12,10",
    "photo": "png",
    "vector": "ndarray:float32:32",
}


def make_samples(count: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "id": i,
            "label": str(i % 10),
            "pixels": rng.integers(0, 17, 64).astype(np.int8),
            "glyph": rng.normal(size=(12, 10)).astype(np.float32),
            "photo": Image.fromarray(rng.integers(0, 256, (12, 16, 3)).astype(np.uint8)),
            "vector": rng.normal(size=32).astype(np.float32),
        }
        for i in range(count)
    ]


def write_version(root: str, samples: list[dict[str, Any]], publish: bool = True) -> int:
    """One overwrite version in small zstd shards (a few samples each), so the head is a few shards."""
    with (
        ShardSet(root).transaction(mode="overwrite", publish=publish) as tx,
        MDSWriter(out=tx.out, columns=COLUMNS, compression="zstd", size_limit="4kb") as writer,
    ):
        for sample in samples:
            writer.write(sample)
    assert tx.version is not None  # committed as the block ended
    return tx.version.number


def decode(markdown: Any, column: str) -> np.ndarray:
    match = re.fullmatch(rf"!\[{column}\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown.value)
    assert match, markdown.value[:80]
    with Image.open(io.BytesIO(base64.b64decode(match[1]))) as image:
        assert image.format == "PNG"
        return np.asarray(image)


def enlarged(picture: np.ndarray, factor: int) -> np.ndarray:
    """``picture`` as the grid draws it: each pixel a ``factor`` x ``factor`` square."""
    return picture.repeat(factor, axis=0).repeat(factor, axis=1)


def scaled(values: list[np.ndarray]) -> list[np.ndarray]:
    """What the preview does to non-uint8 arrays: one min-max over the drawn samples to 0-255."""
    low, high = min(float(v.min()) for v in values), max(float(v.max()) for v in values)
    return [np.rint((v.astype(np.float64) - low) / (high - low) * 255).astype(np.uint8) for v in values]


@pytest.fixture
def digits(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    samples = make_samples(20, seed=1)
    root = str(tmp_path / "digits")
    write_version(root, samples)
    return root, samples


def test_flat_column_with_a_declared_shape_is_drawn_as_8x8_tiles(digits) -> None:
    root, samples = digits
    preview = sample_preview(root, 1, None, {"pixels": (8, 8), "id": None, "label": None, "vector": None})
    assert list(preview) == ["preview_pixels"]  # id, label and a 1-D vector cannot be drawn
    grid = decode(preview["preview_pixels"], "pixels")
    assert grid.shape == (64, 8 * 64 + 7 * GAP)  # eight 8x8 digits enlarged 8x, grey, two pixels apart
    tiles = scaled([s["pixels"].reshape(8, 8) for s in samples[:8]])
    assert np.array_equal(grid[:, :64], enlarged(tiles[0], 8))
    assert np.array_equal(grid[:, 7 * 66 :], enlarged(tiles[7], 8))
    assert (grid[:, 64:66] == GAP_SHADE).all()


def test_without_columns_every_picture_column_by_encoding(digits) -> None:
    root, samples = digits
    preview = sample_preview(root, None, None, {})  # None: the published version
    assert sorted(preview) == ["preview_glyph", "preview_photo"]  # pixels has no shape without a declaration
    photo = decode(preview["preview_photo"], "photo")
    assert photo.shape == (48, 8 * 64 + 7 * GAP, 3)  # 16 x 12 images enlarged 4x, colour kept
    assert np.array_equal(photo[:48, :64], enlarged(np.asarray(samples[0]["photo"]), 4))
    glyph = decode(preview["preview_glyph"], "glyph")
    assert glyph.shape == (60, 8 * 50 + 7 * GAP)  # 12 x 10 floats enlarged 5x
    assert np.array_equal(glyph[:60, :50], enlarged(scaled([s["glyph"] for s in samples[:8]])[0], 5))


def test_more_samples_wrap_into_rows(digits) -> None:
    root, _ = digits
    grid = decode(sample_preview(root, 1, None, {"pixels": (8, 8)}, count=50)["preview_pixels"], "pixels")
    assert grid.shape == (3 * 64 + 2 * GAP, 8 * 64 + 7 * GAP)  # all 20 samples: rows of 8, 8 and 4
    assert (grid[-64:, 4 * 66 :] == GAP_SHADE).all()  # the last row's empty places


def test_nothing_to_draw_is_an_empty_dict(digits) -> None:
    root, _ = digits
    assert sample_preview(root, 1, None, {"id": None, "label": None, "vector": None}) == {}
    assert sample_preview(root, 1, None, {"pixels": (7, 7)}) == {}  # 64 values are no 7 x 7 picture
    assert sample_preview(root, 1, None, {"pixels": None}) == {}  # named, but its values are 1-D


def test_each_version_shows_its_own_samples(tmp_path: Path) -> None:
    root = str(tmp_path / "digits")
    with pytest.raises(ConfigurationError, match="no version is published yet"):
        sample_preview(root, None, None, {"pixels": (8, 8)})
    old, new = make_samples(3, seed=2), make_samples(3, seed=3)
    write_version(root, old)
    write_version(root, new, publish=False)
    for version, samples in [(1, old), (2, new), (None, old)]:  # None: the published one, version 1
        grid = decode(sample_preview(root, version, None, {"pixels": (8, 8)})["preview_pixels"], "pixels")
        assert grid.shape == (64, 3 * 64 + 2 * GAP)
        tiles = scaled([s["pixels"].reshape(8, 8) for s in samples])
        assert np.array_equal(grid[:, :64], enlarged(tiles[0], 8))
    with pytest.raises(ConfigurationError, match="no version 3"):
        sample_preview(root, 3, None, {"pixels": (8, 8)})


def test_only_the_shards_of_the_first_samples_are_downloaded(s3_server: MotoServer) -> None:
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/digits"
    write_version(url, make_samples(40, seed=4))
    shards = ShardSet(url).shards(1)
    first_samples = itertools.accumulate((shard.samples for shard in shards), initial=0)
    # The files of the shards the first 8 samples are in (the zstd files: `fetched` counts no others).
    head = [(shard.zip_data or shard.raw_data).basename for shard, first in zip(shards, first_samples) if first < 8]
    assert len(head) < len(shards) / 2
    since = s3_server.log_position()
    assert list(sample_preview(url, 1, {"endpoint_url": s3_server.endpoint}, {"pixels": (8, 8)})) == ["preview_pixels"]
    fetched = {key for key in object_gets(s3_server.requests(since), bucket) if key.endswith(".zstd")}
    assert fetched == {f"digits/{name}" for name in head}


def test_picture_columns_from_encodings() -> None:
    encodings = {
        "id": "int64",
        "text": "str",
        "img": "pil",
        "jpg": "jpeg",
        "frames": "list[png]",
        "arr": "jpeg_array",
        "digit": "ndarray:uint8:8,8",
        "rgb": "ndarray:uint8:32,32,3",
        "mask": "ndarray:uint16:4,4",
        "flat": "ndarray:int8:64",
        "big": "ndarray:uint8:65,10",
        "cube": "ndarray:uint8:4,4,4",
        "free": "ndarray:float32",
        "any": "ndarray",
        "odd": "ndarray:nope",
    }
    assert picture_columns(encodings) == ["img", "jpg", "frames", "arr", "digit", "rgb", "mask"]
    declared = picture_columns(encodings, {"flat": (8, 8), "free": None, "big": (10, 65), "digit": (4, 4)})
    assert declared == ["img", "jpg", "frames", "arr", "rgb", "mask", "flat", "free"]  # digit: 16 values are not 64


def grid_image(values: list[Any]) -> Image.Image:
    """The grid ``grid_png`` draws of ``values``, opened (every value must be a picture)."""
    png = grid_png(values)
    assert png is not None, values
    return Image.open(io.BytesIO(png))


def test_grid_png_for_image_lists_large_images_and_constant_arrays() -> None:
    frames = [[Image.new("L", (8, 8), 200), Image.new("L", (8, 8), 0)], [Image.new("L", (8, 8), 50)]]
    with grid_image(frames) as image:  # each sample's first image
        assert image.size == (2 * 64 + GAP, 64) and image.getpixel((0, 0)) == 200
    with grid_image([Image.new("RGB", (640, 320), (9, 8, 7))]) as image:
        assert image.size == (64, 32) and image.mode == "RGB"  # large images shrink to the tile size
    with grid_image([np.full((4, 4), 3.0)]) as image:
        assert image.getextrema() == (0, 0)  # a constant array is black, not a division by zero
    assert grid_png([np.zeros((8, 8)), np.zeros(5)]) is None  # one sample that is no picture: no grid
    assert grid_png([np.array(["a", "b"])]) is None
