"""Fuzz target for decompression bombs: compressed shards of every codec that inflate past, to, or just
under the raw size their index entry declares.

Each input is a zip made of known pieces (runs of zeros or of a pattern, random bytes, 16-256 MiB of
zeros in a few hundred bytes: zstd's RLE blocks, concatenated gzip members and bz2 streams, one long
brotli stream, snappy blocks of back-references), some with snappy length headers that lie, some
truncated or mutated (``mutate_bytes``). It is read three ways: ``Codec.decompress(data, limit)``,
``Codec.decompress_file`` into a writer that counts what it is handed, and ``decompress_shard`` (or
``raw_shard_path``) into a scratch folder. Only ``MDSError`` may escape, no read may hand on or write
more than the declared size, an accepted shard has exactly that size and the pieces' real bytes, the
scratch folder holds nothing else afterwards, and the sentinel folder beside it never changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import shutil
from pathlib import Path
from typing import Any

from mds_core.errors import CompressionError, MDSError
from mds_core.format.compression import get_codec
from mds_core.format.index import FileInfo, ShardInfo
from mds_core.storage.raw_shards import decompress_shard, raw_shard_path
from tests.fuzz.checks import changed_entries, short, tree_state
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import mutate_bytes

MiB = 1 << 20
FAMILIES = ["zstd", "gz", "bz2", "br", "snappy"]
SMALL = [0, 1, 2, 255, 4095, 4096, 65536]  # plaintext sizes of the pieces compressed at setup
DECLARED_FOR_BOMBS = [0, 1, 8, 286, 4096, 65535, 65536, MiB - 1, MiB]  # never near a bomb's real size
KNOWN_LIMIT = 4 * MiB  # the real bytes of a zip are compared when they are at most this many
WRITE_SLACK = 4096  # bytes a read may write besides the shard (none are expected)
RAW = "shard.00000.mds"  # the raw shard's name in the scratch folder


def _plain(kind: str, size: int) -> bytes:
    if kind == "zeros":
        return bytes(size)
    if kind == "pattern":
        return (b"abcdefgh\x00\xff" * (size // 10 + 1))[:size]
    return random.Random(f"bomb:{size}").randbytes(size)


def _snappy_block(length_header: int, copies: int) -> bytes:
    """A raw snappy block: a 1-byte literal then ``copies`` back-references of 64 bytes (21x), under a
    length header that may lie (the real length is ``1 + 64 * copies``)."""
    header, value = bytearray(), length_header
    while value >= 0x80:
        header.append(value & 0x7F | 0x80)
        value >>= 7
    header.append(value)
    return bytes(header) + b"\x00\x00" + b"\xfe\x01\x00" * copies


def _bombs(family: str) -> list[tuple[int, bytes]]:
    """(inflated size, zip) of pieces far larger than any declared size: made streaming, at setup."""
    zeros = bytes(MiB)
    if family == "zstd":
        import zstandard

        stream = zstandard.ZstdCompressor().compressobj()  # one frame, no content size in its header
        big = b"".join([stream.compress(zeros) for _ in range(256)] + [stream.flush()])
        sized = zstandard.ZstdCompressor(write_content_size=True).compress(bytes(64 * MiB))
        return [(256 * MiB, big), (64 * MiB, sized)]
    if family == "br":
        import brotli

        compressor = brotli.Compressor(quality=1)
        return [(256 * MiB, b"".join([compressor.process(zeros) for _ in range(256)] + [compressor.finish()]))]
    if family == "snappy":
        return [(1 + 64 * 65536, _snappy_block(1 + 64 * 65536, 65536))]
    return []  # gz and bz2 bombs are concatenated 1 MiB members, per input


class BombTarget:
    """Zips inflating past, to or under their declared raw size -> every decompression path, bounded."""

    name = "bomb"

    def setup(self, workdir: str) -> None:
        self.scratch = os.path.join(workdir, "scratch")  # the shard's folder: the zip, then the raw file
        self.sentinel = os.path.join(workdir, "sentinel")  # beside it: must never change
        for folder in (self.scratch, os.path.join(self.sentinel, "sub")):
            os.makedirs(folder, exist_ok=True)
        for name, data in (("precious", b"keep me"), ("sub/shard.00000.mds", b"\x00" * 64)):
            Path(self.sentinel, name).write_bytes(data)
        self.sentinel_state = tree_state(self.sentinel)
        self.pieces: dict[str, list[tuple[int, bytes | None, bytes]]] = {}  # (size, plaintext or None, zip)
        for family in FAMILIES:
            codec = get_codec(family)
            assert codec is not None
            pieces: list[tuple[int, bytes | None, bytes]] = []
            for kind in ("zeros", "pattern", "random"):
                for size in SMALL:
                    plain = _plain(kind, size)
                    pieces.append((size, plain, codec.compress(plain)))
            pieces.append((MiB, bytes(MiB), codec.compress(bytes(MiB))))
            pieces += [(size, None, data) for size, data in _bombs(family)]
            self.pieces[family] = pieces
        self.zips = [data for pieces in self.pieces.values() for _, _, data in pieces if len(data) < 65536]

    def generate(self, rng: random.Random) -> dict[str, Any]:
        family = rng.choice(FAMILIES)
        codec, pool = get_codec(family), self.pieces[family]
        assert codec is not None
        choice = rng.random()
        if choice < 0.35:  # one piece; for concatenable codecs, sometimes many
            picked = [rng.choice(pool)]
            if codec.concatenable and rng.random() < 0.5:
                picked += [rng.choice(pool) for _ in range(rng.choice((1, 2, 3)))]
        elif choice < 0.55 and codec.concatenable:  # a bomb of concatenated 1 MiB members or frames
            one_mib = next(p for p in pool if p[0] == MiB)
            picked = [one_mib] * rng.choice((2, 16, 64, 256))
        elif choice < 0.65 and family == "snappy":  # back-references under a length header that may lie
            copies = rng.choice((0, 1, 63, 64, 1000, 65536))
            real = 1 + 64 * copies
            header = rng.choice((real, real, real - 1, real + 1, 0, 2**32 - 1, rng.randrange(2**32)))
            data = _snappy_block(max(header, 0), copies)
            return self._case(rng, family, data, real if header == real else None)
        else:  # a fresh small plaintext at a random level
            plain = _plain(rng.choice(("zeros", "pattern", "random")), rng.choice((0, 1, 100, 1000, 4096)))
            level = {"zstd": (1, 19), "gz": (0, 9), "bz2": (1, 9), "br": (0, 9)}.get(family)
            fresh = get_codec(f"{family}:{rng.randint(*level)}" if level else family)
            assert fresh is not None
            picked = [(len(plain), plain, fresh.compress(plain))]
        data = b"".join(zip_ for _, _, zip_ in picked)
        inflated = sum(size for size, _, _ in picked)
        case = self._case(rng, family, data, inflated)
        if case["inflated"] is not None and inflated <= KNOWN_LIMIT and all(p is not None for _, p, _ in picked):
            case["digest"] = hashlib.sha1(b"".join(plain or b"" for _, plain, _ in picked)).hexdigest()
        return case

    def _case(self, rng: random.Random, family: str, data: bytes, inflated: int | None) -> dict[str, Any]:
        if inflated is not None and inflated <= KNOWN_LIMIT:
            declared = max(0, rng.choice((inflated, inflated, inflated - 1, inflated + 1, inflated // 2, 2 * inflated)))
        else:  # a bomb, or a size unknown: never near what it inflates to
            declared = rng.choice(DECLARED_FOR_BOMBS)
        if rng.random() < 0.3:  # damaged: truncated, flipped, spliced; what it inflates to is unknown
            data, inflated = mutate_bytes(rng, data, self.zips), None
        return {
            "family": family,
            "data": data,
            "declared": declared,
            "inflated": inflated,
            "digest": None,
            "path": rng.choice(("decompress_shard", "decompress_shard", "raw_shard_path")),
        }

    def check(self, case: dict[str, Any]) -> None:
        family, data, declared, inflated = case["family"], case["data"], case["declared"], case["inflated"]
        codec = get_codec(family)
        assert codec is not None
        where = f"{family} zip of {len(data)} bytes declared {declared} (inflates to {inflated})"
        try:
            in_memory: bytes | None = codec.decompress(data, declared)
        except CompressionError:
            in_memory = None
        counted = _Counting()
        with contextlib.suppress(CompressionError):
            codec.decompress_file(io.BytesIO(data), counted, declared)
        if counted.total > declared or (in_memory is not None and len(in_memory) > declared):
            raise PropertyFailure(f"{family} inflated past the limit", f"{where}: handed on {counted.total} bytes")
        if inflated is not None and (in_memory is not None) != (inflated <= declared):
            raise PropertyFailure(
                f"{family} limit misjudged", f"{where}: bounded decompression {'accepted' if in_memory else 'refused'}"
            )
        if in_memory is not None and case["digest"] not in (None, hashlib.sha1(in_memory).hexdigest()):
            raise PropertyFailure(f"{family} wrong bytes", f"{where}: bounded decompression changed the data")
        shard = self._read_shard(case, where)
        exact = in_memory if in_memory is not None and len(in_memory) == declared else None
        if shard != exact:
            raise PropertyFailure(
                f"{family} shard paths disagree",
                f"{where}: the shard file is {short(shard)}, in-memory decompression gave {short(in_memory)}",
            )

    def _read_shard(self, case: dict[str, Any], where: str) -> bytes | None:
        """The raw shard file decompressed into the scratch folder (None: refused), checking what was written."""
        family, declared = case["family"], case["declared"]
        zip_info = FileInfo(f"{RAW}.{family}", len(case["data"]))
        info = ShardInfo([], [], [], family, [], FileInfo(RAW, declared), 0, None, zip_info)
        zip_path, raw_path = os.path.join(self.scratch, zip_info.basename), os.path.join(self.scratch, RAW)
        Path(zip_path).write_bytes(case["data"])
        written = _bytes_written()
        try:
            if case["path"] == "raw_shard_path":
                raw_shard_path(self.scratch, info, self.scratch)
            else:
                decompress_shard(zip_path, raw_path, info)
        except MDSError:  # the refusal; the folder is checked all the same
            pass
        written = _bytes_written() - written
        try:
            return self._leftovers(family, declared, written, raw_path, where)
        finally:
            shutil.rmtree(self.scratch)
            os.mkdir(self.scratch)

    def _leftovers(self, family: str, declared: int, written: int, raw_path: str, where: str) -> bytes | None:
        sizes = {name: os.lstat(os.path.join(self.scratch, name)).st_size for name in os.listdir(self.scratch)}
        extra = set(sizes) - {f"{RAW}.{family}", RAW}
        if extra or sizes.get(RAW, 0) > declared or written > declared + WRITE_SLACK:
            raise PropertyFailure(
                f"{family} wrote past the limit", f"{where}: {written} bytes written; left {sorted(sizes.items())[:5]}"
            )
        changed = changed_entries(self.sentinel_state, tree_state(self.sentinel))
        if changed:
            raise PropertyFailure("bomb wrote outside its folder", f"{where}: changed {changed[:5]}")
        if RAW not in sizes:
            return None
        if sizes[RAW] != declared:
            raise PropertyFailure(f"{family} shard of the wrong size", f"{where}: {sizes[RAW]} bytes kept")
        return Path(raw_path).read_bytes()


class _Counting:
    """A writer that keeps nothing and counts what it is handed."""

    def __init__(self) -> None:
        self.total = 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.total += size
        return size


def _bytes_written() -> int:
    """Bytes this process has passed to write(2) so far (``/proc/self/io``'s ``wchar``), or 0 where unknown."""
    try:
        with open("/proc/self/io") as file:
            return next(int(line.split()[1]) for line in file if line.startswith("wchar:"))
    except (OSError, StopIteration):
        return 0
