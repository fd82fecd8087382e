"""Fuzz targets for the bytes of a dataset: index.json, shards, column values and compressed shards."""

from __future__ import annotations

import io
import json
import os
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np

from mds_core.errors import CompressionError, CorruptShardError
from mds_core.format.compression import get_codec
from mds_core.format.encodings import get_coder, mds_decode
from mds_core.format.index import dumps_index, parse_index
from mds_core.format.shard import MIN_TAKE_BLOCK, Schema, ShardReader
from mds_core.storage.raw_shards import decompress_shard
from mds_core.streaming.local import _build_schemas
from tests.fuzz import seeds
from tests.fuzz.checks import check_views_inside, outcome, short
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_bytes, mutate_json


class IndexTarget:
    """``index.json`` text -> ``parse_index`` and the schemas ``LocalDataset`` builds from it."""

    name = "index"

    def setup(self, workdir: str) -> None:
        extra = seeds.all_encodings_dataset(os.path.join(workdir, "all"))
        self.texts = seeds.golden_index_texts() + [Path(extra, "index.json").read_bytes()]
        self.objects = [json.loads(text) for text in self.texts]

    def generate(self, rng: random.Random) -> dict[str, Any]:
        choice = rng.random()
        if choice < 0.45:
            text = mutate_bytes(rng, rng.choice(self.texts), self.texts)
        elif choice < 0.97:
            text = json.dumps(mutate_json(rng, rng.choice(self.objects))).encode()
        else:  # nesting deep enough to hit the parser's recursion limit
            depth = rng.choice((100, 5000, 100_000))
            text = b'{"shards": ' + b"[" * depth + b"]" * depth + b', "version": 2}'
        return {"text": text, "unsafe": rng.random() < 0.5}

    def check(self, case: dict[str, Any]) -> None:
        shards = parse_index(case["text"], "fuzz/index.json")
        _build_schemas(shards, "fuzz", case["unsafe"])
        # What parses must serialise and parse back to the same entries (merge and versions rely on it).
        again = parse_index(dumps_index(shards), "round trip")
        if again != shards:
            raise PropertyFailure("index round trip", "dumps_index(parse_index(text)) parses differently")


def read_all_ways(reader: ShardReader, base: np.ndarray) -> None:
    """Every sample three ways (random access, batched ``take``, in-order iteration); they must agree.

    Each value must come from its own sample's bytes, and when the layout check that ``mds verify``
    runs passes, no read may fail on the layout.
    """
    n = reader.num_samples
    one = []
    for i in range(n):
        result = outcome(reader.__getitem__, i)
        if not (isinstance(result, tuple) and result and result[0] == "error"):
            offsets = reader._offsets
            check_views_inside(reader[i], base, int(offsets[i]), int(offsets[i + 1]), f"{reader.path} sample {i}")
        one.append(result)
    errors = [r for r in one if isinstance(r, tuple) and r and r[0] == "error"]
    # At least MIN_TAKE_BLOCK samples, repeating them, so that ``take`` decodes column by column (not one at a time).
    repeats = np.resize(np.arange(n, dtype=np.int64), max(n, MIN_TAKE_BLOCK)) if n else np.arange(0, dtype=np.int64)
    many = outcome(reader.take, repeats)
    ordered = outcome(lambda: list(reader))
    for name, got in (("take", many), ("iteration", ordered)):
        if errors and got != errors[0]:
            raise PropertyFailure(
                f"{name} disagrees", f"{reader.path}: {name} gave {str(got)[:80]}, random access {errors[0]}"
            )
        if not errors and got != (one if name == "iteration" else [one[i] for i in repeats.tolist()]):
            raise PropertyFailure(f"{name} disagrees", f"{reader.path}: {name} returned other values")
    try:
        reader.check_samples()
        layout_ok = True
    except CorruptShardError:
        layout_ok = False
    if layout_ok and ("error", "CorruptShardError") in errors:
        raise PropertyFailure("layout check misses", f"{reader.path}: check_samples passed but a read failed")


class ShardTarget:
    """Shard bytes -> ``ShardReader`` (in memory, or memory-mapped from a file) -> every sample."""

    name = "shard"

    def setup(self, workdir: str) -> None:
        self.workdir = workdir
        extra = seeds.all_encodings_dataset(os.path.join(workdir, "all"))
        self.seeds = seeds.raw_shard_seeds(extra)
        self.schemas = [Schema(s.column_names, s.column_encodings) for _, s, _ in self.seeds]
        self.datas = [data for _, _, data in self.seeds]

    def generate(self, rng: random.Random) -> dict[str, Any]:
        which = rng.randrange(len(self.seeds))
        data = mutate_bytes(rng, self.datas[which], self.datas)
        # "index": sizes from the index (most mutations stop at the size check); "own": the index
        # agrees with the file's size and header count (as if rewritten together), so reads go deeper.
        return {
            "seed": self.seeds[which][0],
            "data": data,
            "sizes": rng.choice(("index", "own", "own", "own")),
            "file": rng.random() < 0.1,
        }

    def check(self, case: dict[str, Any]) -> None:
        which = next(i for i, s in enumerate(self.seeds) if s[0] == case["seed"])
        info, data, schema = self.seeds[which][1], case["data"], self.schemas[which]
        samples, expected = info.samples, info.raw_data.bytes
        if case["sizes"] == "own":
            expected = len(data)
            if len(data) >= 4 and struct.unpack_from("<I", data)[0] < 100_000:
                samples = struct.unpack_from("<I", data)[0]
        if case["file"]:
            path = Path(self.workdir, "shard.mds")
            path.write_bytes(data)
            reader = ShardReader.open(str(path), schema, samples, expected)
        else:
            reader = ShardReader(data, case["seed"], schema, samples, expected)
        try:
            read_all_ways(reader, np.frombuffer(reader._mm, np.uint8) if len(reader._mm) else np.zeros(0, np.uint8))
        finally:
            reader.close()


class DecodeTarget:
    """One column value's bytes -> its coder's ``decode``, for every encoding of the registry.

    The value is decoded three times: alone, and between two different paddings. A decoder that
    reads outside its value gets different bytes each time, so the outcomes differ (or the lone
    decode fails with a non-MDSError): an out-of-bounds read, found without instrumenting it.
    """

    name = "decode"

    def setup(self, workdir: str) -> None:
        self.encodings = list(seeds.sample_values(0))
        self.values = {e: [get_coder(e).encode(seeds.sample_values(i)[e]) for i in range(4)] for e in self.encodings}

    def generate(self, rng: random.Random) -> dict[str, Any]:
        encoding = rng.choice(self.encodings)
        pool = self.values[encoding]
        data = mutate_bytes(rng, rng.choice(pool), pool) if rng.random() < 0.95 else rng.choice(pool)
        return {"encoding": encoding, "data": data, "pad": rng.randrange(1, 64)}

    def check(self, case: dict[str, Any]) -> None:
        encoding, data, pad = case["encoding"], case["data"], case["pad"]
        coder = get_coder(encoding)
        if coder.size is not None and len(data) != coder.size:
            return  # the shard's layout check rejects these before any decoder runs
        alone = outcome(mds_decode, encoding, data)
        for fill in (b"\x00", b"\xff"):
            buf = fill * pad + data + fill * pad
            padded = outcome(coder.decode, buf, pad, len(data))
            if padded != alone:
                raise PropertyFailure(
                    "out-of-bounds read", f"{encoding}: decoding depends on the bytes around the value"
                )
            if not (isinstance(padded, tuple) and padded[0] == "error"):
                check_views_inside(
                    coder.decode(buf, pad, len(data)), np.frombuffer(buf, np.uint8), pad, pad + len(data), encoding
                )


class CompressedTarget:
    """Compressed shard bytes -> decompression two ways (in memory for verify, streamed for readers) -> samples."""

    name = "compressed"

    def setup(self, workdir: str) -> None:
        self.workdir = workdir
        self.seeds = seeds.zip_shard_seeds()
        self.datas = [data for _, _, data in self.seeds]

    def generate(self, rng: random.Random) -> dict[str, Any]:
        which = rng.randrange(len(self.seeds))
        return {
            "seed": self.seeds[which][0],
            "data": mutate_bytes(rng, self.datas[which], self.datas),
            "file": rng.random() < 0.1,
        }

    def check(self, case: dict[str, Any]) -> None:
        info = next(s for name, s, _ in self.seeds if name == case["seed"])
        codec, data = get_codec(info.compression), case["data"]
        assert codec is not None
        in_memory = _decompressed(codec.decompress, data)
        streamed = _decompressed(lambda d: _stream(codec, d), data)
        # ``mds verify`` accepts what decompresses in memory to the index's size; readers what streams
        # to that size (the streamed decoders stop quietly at a truncated frame; the size check catches
        # it). Both must accept the same inputs, with the same bytes.
        size = info.raw_data.bytes
        verify_accepts = in_memory if isinstance(in_memory, bytes) and len(in_memory) == size else None
        reader_accepts = streamed if isinstance(streamed, bytes) and len(streamed) == size else None
        if verify_accepts != reader_accepts:
            raise PropertyFailure(
                "decompression paths disagree",
                f"{case['seed']}: in memory {short(in_memory)}, streamed {short(streamed)}",
            )
        if case["file"]:  # the reader's real path: a zip file, decompressed through a temporary file
            zip_path, raw_path = os.path.join(self.workdir, "shard.zip"), os.path.join(self.workdir, "shard.mds")
            Path(zip_path).write_bytes(data)
            decompress_shard(zip_path, raw_path, info)
        if verify_accepts is not None:
            schema = Schema(info.column_names, info.column_encodings)
            reader = ShardReader(verify_accepts, case["seed"], schema, info.samples, size)
            read_all_ways(reader, np.frombuffer(verify_accepts, np.uint8))


def _decompressed(func: Any, data: bytes) -> Any:
    try:
        return func(data)
    except CompressionError:
        return "error"


def _stream(codec: Any, data: bytes) -> bytes:
    out = io.BytesIO()
    codec.decompress_file(io.BytesIO(data), out)
    return out.getvalue()
