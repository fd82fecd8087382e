"""Finding 12 of the review, the previews: an image whose header claims too many pixels is not decoded.

Pillow refuses an image over twice ``Image.MAX_IMAGE_PIXELS`` (about 179M pixels) when it opens it, but
between that and ``MAX_IMAGE_PIXELS`` (about 89M) it only warns, and the preview converted the whole image
before making it a thumbnail. The preview now treats that warning as an error while it decodes samples:
the sample's tile is left out, with a note saying why, and the rest of the preview (and the
materialisation) goes on.
"""

from __future__ import annotations

import base64
import io
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mds_core import MDSWriter
from mds_core.versions import ShardSet
from pipelines.previews import GAP, sample_preview

COLUMNS = {"id": "int64", "photo": "png", "pixels": "ndarray:uint8:8,8"}


def write_version(root: str, photos: list[Image.Image]) -> None:
    with (
        ShardSet(root).transaction(mode="overwrite") as tx,
        MDSWriter(out=tx.out, columns=COLUMNS, size_limit="1mb") as writer,
    ):
        for i, photo in enumerate(photos):
            writer.write({"id": i, "photo": photo, "pixels": np.full((8, 8), 10 * i, np.uint8)})


def small(seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (12, 16, 3)).astype(np.uint8))


def picture_and_notes(markdown: Any, column: str) -> tuple[np.ndarray | None, list[str]]:
    """The grid a preview's markdown holds (None if it holds none), and the notes after it."""
    parts = markdown.value.split("\n\n")
    match = re.fullmatch(rf"!\[{column}\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", parts[0])
    if match is None:
        return None, parts
    with Image.open(io.BytesIO(base64.b64decode(match[1]))) as image:
        return np.asarray(image), parts[1:]


def tiles_across(grid: np.ndarray, side: int = 64) -> int:
    return (grid.shape[1] + GAP) // (side + GAP)


def bomb_note(index: int) -> str:
    return (
        f"sample {index} not drawn: an image of it has more than {Image.MAX_IMAGE_PIXELS:,} pixels, Pillow's limit "
        "for untrusted images (a possible decompression bomb), so it was not decoded"
    )


def test_a_100_megapixel_png_is_left_out_of_the_preview_with_a_note(tmp_path: Path) -> None:
    # A real PNG of 10,000 x 10,000 black pixels: 97 kB on disk, 100 MB decoded, between Pillow's warning
    # (89M pixels) and its error (179M).
    bomb = Image.new("L", (10_000, 10_000))
    root = str(tmp_path / "photos")
    write_version(root, [small(1), bomb, small(2)])
    del bomb
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        preview = sample_preview(root, 1, None, {"photo": None, "pixels": None})
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]
    assert sorted(preview) == ["preview_photo", "preview_pixels"]
    for column in ("photo", "pixels"):  # the sample is left out of every column: it was not decoded at all
        grid, notes = picture_and_notes(preview[f"preview_{column}"], column)
        assert grid is not None and tiles_across(grid) == 2, column
        assert notes == [bomb_note(1)]
    grid, _ = picture_and_notes(preview["preview_photo"], "photo")
    assert grid is not None
    assert np.array_equal(grid[:48, 64 + GAP :], np.asarray(small(2)).repeat(4, axis=0).repeat(4, axis=1))


@pytest.mark.parametrize("side", [40, 50])  # 1,600 pixels: over the limit of 1,000 (a warning); 2,500: over twice it
def test_every_sample_over_the_limit_is_left_out_and_the_rest_drawn(side: int, tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path / "photos")
    write_version(root, [Image.new("RGB", (side, side)), small(3), Image.new("RGB", (side, side))])
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    preview = sample_preview(root, 1, None, {"photo": None})
    expected = [bomb_note(0), bomb_note(2)]
    monkeypatch.undo()  # Pillow's own limit again, to read the preview
    grid, notes = picture_and_notes(preview["preview_photo"], "photo")
    assert grid is not None and tiles_across(grid) == 1
    assert notes == expected


def test_a_preview_of_bombs_only_is_the_notes(tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path / "photos")
    write_version(root, [Image.new("RGB", (40, 40))])
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    preview = sample_preview(root, 1, None, {"photo": None})
    grid, notes = picture_and_notes(preview["preview_photo"], "photo")
    assert grid is None and notes == [bomb_note(0)]
