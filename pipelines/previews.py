"""A picture of a version's first samples, as Dagster metadata the UI shows inline.

``sample_preview`` reads the first few samples of one version of a shard set (downloading only the
shards they live in, into a temporary folder) and draws each picture-able column as one grid PNG:
images as they are, small arrays (an 8x8 digit, a 28x28 glyph) scaled to 0-255 and enlarged with
nearest-neighbour so single pixels stay visible. The PNG travels inside a markdown image
(``data:image/png;base64,...``), because Dagster's UI renders markdown but has no image metadata type.

The samples are nobody's vetted input, and Pillow only *warns* about an image between
``Image.MAX_IMAGE_PIXELS`` (about 89M pixels) and twice that, then decodes it in full. So while samples
are decoded and converted here that warning is an error, and a sample whose image Pillow refuses is left
out of the preview with a note under the picture, instead of failing the materialisation.
"""

from __future__ import annotations

import base64
import contextlib
import io
import math
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from dagster import MetadataValue

from mds_core.errors import ConfigurationError, DecodeError, StoreFileNotFoundError, UnknownEncodingError
from mds_core.format.encodings import get_coder
from mds_core.format.index import INDEX_BASENAME, ShardInfo, parse_index
from mds_core.format.ndarray import NDArrayCoder
from mds_core.storage.remote import RemoteStore, open_store
from mds_core.storage.urls import redact
from mds_core.streaming.local import LocalDataset
from mds_core.streaming.version_sample import fetch_shards, write_subset_index
from mds_core.versions import ShardSet

if TYPE_CHECKING:
    from PIL import Image

Shape = tuple[int, ...]
Sample = tuple[int, dict[str, Any] | None]  # a sample's index, and its columns (None: Pillow refused an image of it)
IMAGE_ENCODINGS = frozenset({"pil", "jpeg", "png", "list[pil]", "list[jpeg]", "list[png]", "jpeg_array", "jpegarray"})
MAX_ARRAY_SIDE = 64  # larger arrays are data (embeddings, spectra), not pictures
TILE_SIDE = 64  # small tiles are enlarged up to this; larger images shrunk to it, to keep metadata small
TILES_PER_ROW = 8
GAP = 2  # pixels between tiles
GAP_SHADE = 128  # mid grey: visible between black and white tiles alike
DOWNLOAD_TIMEOUT = 120.0  # seconds per shard file


def picture_columns(columns: dict[str, str], shapes: Mapping[str, Shape | None] | None = None) -> list[str]:
    """The columns (name -> MDS encoding) that can be drawn, judged from their encodings.

    Images (``pil``, ``jpeg``, ``png``, their lists, ``jpeg_array``) can; an ``ndarray`` can when its
    shape (fixed by the encoding, or declared in ``shapes``, e.g. ``{"pixels": (8, 8)}`` for a flat
    64-value column) is 2-D (or H x W x 1|3) within 64 x 64. An ``ndarray`` with no fixed shape that
    ``shapes`` names with None is kept too: its decoded values decide.
    """
    shapes = shapes or {}
    return [name for name, encoding in columns.items() if _picturable(encoding, name in shapes, shapes.get(name))]


def sample_preview(
    url: str,
    version: int | None,
    storage_options: dict[str, Any] | None,
    columns: Mapping[str, Shape | None],
    count: int = 8,
) -> dict[str, MetadataValue]:
    """``{"preview_<column>": markdown image}`` for the first ``count`` samples of ``version``.

    ``version`` None reads the published version (the root ``index.json``). ``columns`` names the
    columns to draw, each with a declared shape or None; empty: every column whose encoding is
    picture-able. Columns that cannot be drawn are skipped; none left gives ``{}``. A missing
    version (or nothing published) is a ``ConfigurationError``, a store that fails a ``StorageError``.
    """
    shard_set = ShardSet(url, storage_options=storage_options)
    head = _head_shards(_version_shards(shard_set, version), count)
    if not head:
        return {}
    encodings = dict(zip(head[0].column_names, head[0].column_encodings))
    if columns:
        encodings = {name: encoding for name, encoding in encodings.items() if name in columns}
    names = picture_columns(encodings, columns)
    if not names:
        return {}  # nothing to draw: nothing downloaded
    # The shard set's own store waits for ever; a preview must not hang the run that asks for it.
    store = open_store(url, retry=3, timeout=DOWNLOAD_TIMEOUT, storage_options=storage_options)
    preview: dict[str, MetadataValue] = {}
    with _opened(store, head) as dataset, _bombs_refused():
        samples = [(index, _read_sample(dataset, index)) for index in range(min(count, len(dataset)))]
        for name in names:  # drawn while the shards are mapped: decoded arrays may be views of them
            markdown = _column_markdown(name, samples, columns.get(name))
            if markdown is not None:
                preview[f"preview_{name}"] = MetadataValue.md(markdown)
    return preview


def grid_png(values: list[Any], shape: Shape | None = None) -> bytes | None:
    """One row (or more, past 8) of tiles as PNG bytes; None when a value is not a picture."""
    return _grid_png([_as_array(value, shape) for value in values])


def _grid_png(arrays: list[np.ndarray | None]) -> bytes | None:
    if not arrays or any(array is None for array in arrays):
        return None  # a column some of whose samples are no pictures is not drawn at all
    tiles = _to_uint8([array for array in arrays if array is not None])
    return _encode_png(_grid(tiles))


# -------------------------------------------------------------------------------------------------
# images Pillow refuses to decode


@contextlib.contextmanager
def _bombs_refused() -> Iterator[None]:
    """Pillow's decompression-bomb warning raised as an error (``warnings`` filters are per process)."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        yield


def _bombs() -> tuple[type[Exception], ...]:
    from PIL import Image

    return (Image.DecompressionBombWarning, Image.DecompressionBombError)


def _read_sample(dataset: LocalDataset, index: int) -> dict[str, Any] | None:
    """The sample's columns, or None when Pillow refused an image of it (mds_core's decoder wraps the refusal)."""
    try:
        return dataset[index]
    except DecodeError as err:
        cause: BaseException | None = err
        while isinstance(cause, DecodeError):  # the shard's, the column's and the value's context around it
            cause = cause.__cause__
        if isinstance(cause, _bombs()):
            return None
        raise


def _bomb_note(index: int) -> str:
    from PIL import Image

    return (
        f"sample {index} not drawn: an image of it has more than {Image.MAX_IMAGE_PIXELS:,} pixels, Pillow's limit "
        "for untrusted images (a possible decompression bomb), so it was not decoded"
    )


def _column_markdown(name: str, samples: list[Sample], shape: Shape | None) -> str | None:
    """The column's grid as a markdown image, followed by a note for each sample left out.

    None when the column is no picture.
    """
    arrays: list[np.ndarray | None] = []
    notes: list[str] = []
    for index, sample in samples:
        try:
            if sample is not None:  # else Pillow refused an image of it when it was read
                arrays.append(_as_array(sample[name], shape))
                continue
        except _bombs():  # refused while converting rather than opening
            pass
        notes.append(_bomb_note(index))
    png = _grid_png(arrays)
    if png is None and arrays:
        return None
    image = [f"![{name}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"] if png is not None else []
    return "\n\n".join(image + notes) or None


# -------------------------------------------------------------------------------------------------
# which shards, read how


def _version_shards(shard_set: ShardSet, version: int | None) -> list[ShardInfo]:
    if version is not None:
        return shard_set.shards(version)  # ConfigurationError naming the versions there if missing
    try:
        published = shard_set.store.read_bytes(INDEX_BASENAME)
    except StoreFileNotFoundError:
        raise ConfigurationError(
            f"{redact(shard_set.store.url)}: no version is published yet; pass version=N"
        ) from None
    return parse_index(published, shard_set.store.url_of(INDEX_BASENAME))


def _head_shards(shards: list[ShardInfo], count: int) -> list[ShardInfo]:
    """The fewest leading shards that hold the first ``count`` samples (empty shards left out)."""
    head, held = [], 0
    for shard in shards:
        if held >= count:
            break
        if shard.samples:
            head.append(shard)
            held += shard.samples
    return head


@contextlib.contextmanager
def _opened(store: RemoteStore, shards: list[ShardInfo]) -> Iterator[LocalDataset]:
    """The shards downloaded into a temporary folder, opened with mds_core's local reader."""
    with tempfile.TemporaryDirectory(prefix="mds-preview-") as local:
        fetch_shards(store, local, shards)  # raw files (decompressed) at their basenames under local
        write_subset_index(shards, local)
        with LocalDataset(local) as dataset:
            yield dataset


# -------------------------------------------------------------------------------------------------
# deciding and drawing


def _picturable(encoding: str, named: bool, declared: Shape | None) -> bool:
    if encoding in IMAGE_ENCODINGS:
        return True
    if not encoding.startswith("ndarray"):
        return False
    try:
        coder = get_coder(encoding)
    except UnknownEncodingError:
        return False
    if not isinstance(coder, NDArrayCoder):  # every ndarray... encoding parses to one
        return False
    fixed = coder.shape
    if declared is not None and fixed is not None and math.prod(fixed) != math.prod(declared):
        return False
    shape = declared or fixed
    return _small_picture_shape(shape) if shape is not None else named


def _small_picture_shape(shape: Shape) -> bool:
    flat = len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3))
    return flat and min(shape[:2]) >= 1 and max(shape[:2]) <= MAX_ARRAY_SIDE


def _as_array(value: Any, shape: Shape | None) -> np.ndarray | None:
    """One sample as an (H, W) or (H, W, 3) array, or None when it is no picture."""
    from PIL import Image

    if isinstance(value, list):  # list[pil], jpeg_array: the first image stands for the sample
        value = value[0] if value else None
    if isinstance(value, Image.Image):
        return _image_array(value)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        return None
    if shape is not None:
        if value.size != math.prod(shape):
            return None
        value = value.reshape(shape)
    if not _small_picture_shape(value.shape):
        return None
    picture: np.ndarray = value[..., 0] if value.ndim == 3 and value.shape[2] == 1 else value
    return picture


def _image_array(image: Image.Image) -> np.ndarray:
    image = image.convert("L" if image.mode in ("1", "L", "I", "I;16", "F") else "RGB")
    if max(image.size) > TILE_SIDE:
        image = image.copy()
        image.thumbnail((TILE_SIDE, TILE_SIDE))
    return np.asarray(image, dtype=np.uint8)


def _to_uint8(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """0-255 values; all of a column's tiles scaled together, so they compare (uint8 kept as it is)."""
    if all(array.dtype == np.uint8 for array in arrays):
        return arrays
    values = [np.asarray(array, dtype=np.float64) for array in arrays]
    finite = np.concatenate([v[np.isfinite(v)] for v in values])
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    span = high - low or 1.0  # a constant column is drawn black, not divided by zero
    return [
        np.rint(np.nan_to_num((v - low) / span * 255.0, nan=0.0, posinf=255.0, neginf=0.0)).astype(np.uint8)
        for v in values
    ]


def _grid(tiles: list[np.ndarray]) -> np.ndarray:
    """Tiles side by side in rows of 8, each enlarged by the same whole factor, with grey gaps."""
    colour = any(tile.ndim == 3 for tile in tiles)
    if colour:
        tiles = [np.repeat(tile[..., None], 3, axis=2) if tile.ndim == 2 else tile for tile in tiles]
    cell_h, cell_w = max(t.shape[0] for t in tiles), max(t.shape[1] for t in tiles)
    factor = max(1, TILE_SIDE // max(cell_h, cell_w))
    cell_h, cell_w = cell_h * factor, cell_w * factor
    per_row = min(len(tiles), TILES_PER_ROW)
    rows = math.ceil(len(tiles) / per_row)
    canvas = np.full(
        (rows * cell_h + (rows - 1) * GAP, per_row * cell_w + (per_row - 1) * GAP) + ((3,) if colour else ()),
        GAP_SHADE,
        dtype=np.uint8,
    )
    for position, tile in enumerate(tiles):
        top, left = (position // per_row) * (cell_h + GAP), (position % per_row) * (cell_w + GAP)
        big = tile.repeat(factor, axis=0).repeat(factor, axis=1)  # nearest-neighbour
        canvas[top : top + big.shape[0], left : left + big.shape[1]] = big
    return canvas


def _encode_png(canvas: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(canvas).save(out, format="PNG")  # uint8 (H, W) is L, (H, W, 3) RGB
    return out.getvalue()
