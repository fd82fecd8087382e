"""Mutations of seed inputs: byte-level (for shards, zips, encoded values) and structural (for JSON objects).

Plain random bytes would almost always fail the first length or magic check, so every mutation
starts from a real, valid seed and changes a little of it: the parsers then get past their first
checks and the deeper code runs. The mutations are the usual ones of coverage-guided fuzzers
(bit flips, "interesting" integers, inserted, deleted and duplicated runs, splices of two seeds).
"""

from __future__ import annotations

import copy
import json
import random
import struct
from typing import Any

# Values that sit on the edges parsers check: 0, 1, small counts, sign bits, all ones.
INTERESTING_U32 = [0, 1, 2, 3, 4, 7, 8, 16, 63, 64, 255, 256, 4095, 4096, 65535, 65536]
INTERESTING_U32 += [0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]
INTERESTING_U8 = [0, 1, 2, 3, 4, 0x7F, 0x80, 0xFE, 0xFF]


def mutate_bytes(rng: random.Random, data: bytes, others: list[bytes] | None = None, rounds: int = 0) -> bytes:
    """A few (1-4, or ``rounds``) random byte-level mutations of ``data``; ``others`` are splice partners."""
    out = bytearray(data)
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 2, 3, 4))):
        _MUTATIONS[rng.randrange(len(_MUTATIONS))](rng, out, others or [])
    return bytes(out)


def _flip_bit(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    if out:
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)


def _set_byte(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    if out:
        out[rng.randrange(len(out))] = rng.choice(INTERESTING_U8) if rng.random() < 0.5 else rng.randrange(256)


def _set_u32(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    # MDS headers, offsets and size tables are little-endian u32s at 4-byte boundaries.
    if len(out) >= 4:
        at = rng.randrange(len(out) - 3) & ~3 if rng.random() < 0.7 else rng.randrange(len(out) - 3)
        value = rng.choice(INTERESTING_U32)
        if rng.random() < 0.3:  # near the current value: off-by-one bugs
            value = (struct.unpack_from("<I", out, at)[0] + rng.choice((-2, -1, 1, 2))) & 0xFFFFFFFF
        struct.pack_into("<I", out, at, value)


def _delete(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    if out:
        at = rng.randrange(len(out))
        del out[at : at + rng.choice((1, 1, 2, 4, rng.randrange(1, 64)))]


def _insert(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    at = rng.randrange(len(out) + 1)
    out[at:at] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 1, 2, 4, rng.randrange(1, 32)))))


def _duplicate(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    if out:
        at = rng.randrange(len(out))
        run = out[at : at + rng.randrange(1, 64)]
        to = rng.randrange(len(out) + 1)
        out[to:to] = run


def _truncate(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    if out:
        del out[rng.randrange(len(out)) :]


def _splice(rng: random.Random, out: bytearray, others: list[bytes]) -> None:
    # Half of this input, the rest of another seed: valid-looking pieces in the wrong places.
    if others:
        other = rng.choice(others)
        if out and other:
            at, at2 = rng.randrange(len(out)), rng.randrange(len(other))
            out[at:] = other[at2:]


# Flips and sets of bytes and u32s are drawn twice as often as the others.
_MUTATIONS = [_flip_bit, _flip_bit, _set_byte, _set_byte, _set_u32, _set_u32, _delete, _insert, _duplicate]
_MUTATIONS += [_truncate, _splice]


# Structural mutations of JSON-like objects (index entries, manifests, state dicts) draw from these values.
WEIRD_VALUES: list[Any] = [None, True, False, 0, -1, 1, 2, 3, 2**31, 2**32, 2**63, -(2**63), 10**30, 0.5, 2.0, -0.0]
WEIRD_VALUES += [float("nan"), float("inf"), "", "x", "2", "../../etc/passwd", "/abs", "a\0b", "ndarray:int8:0"]
WEIRD_VALUES += [[], [1], ["a"], [None], {}, {"a": 1}, "\udcff", "é" * 3]


def weird_value(rng: random.Random) -> Any:
    """One of ``WEIRD_VALUES`` (a fresh copy: callers mutate what they get)."""
    return copy.deepcopy(rng.choice(WEIRD_VALUES))


def mutate_json(rng: random.Random, obj: Any, rounds: int = 0) -> Any:
    """A deep copy of ``obj`` with a few values replaced, keys dropped or added, or lists resized."""
    obj = copy.deepcopy(obj)
    for _ in range(rounds or rng.choice((1, 1, 2, 3))):
        obj = _mutate_json_once(rng, obj)
    return obj


def mutate_record(rng: random.Random, data: bytes) -> bytes:
    """A JSON file's bytes, mutated structurally (60 %) or byte by byte."""
    if rng.random() < 0.6:
        return json.dumps(mutate_json(rng, json.loads(data))).encode()
    return mutate_bytes(rng, data)


def _mutate_json_once(rng: random.Random, obj: Any) -> Any:
    # Walk down a random path; at its end, change the container or replace the value.
    path: list[Any] = []
    node = obj
    while isinstance(node, (dict, list)) and node and rng.random() < 0.75:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    action = rng.random()
    if isinstance(node, dict) and action < 0.3:
        if node and rng.random() < 0.5:
            del node[rng.choice(list(node))]
        else:
            node[rng.choice(["extra", "version", "bytes", "hashes", "shards"])] = weird_value(rng)
        return obj
    if isinstance(node, list) and action < 0.3:
        if node and rng.random() < 0.5:
            del node[rng.randrange(len(node))]
        else:
            node.insert(rng.randrange(len(node) + 1), node[0] if node and rng.random() < 0.5 else weird_value(rng))
        return obj
    new = _nearby(rng, node) if rng.random() < 0.4 else weird_value(rng)
    if not path:
        return new
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return obj


def _nearby(rng: random.Random, value: Any) -> Any:
    """A value of the same type, slightly off: the off-by-one and empty-string cases."""
    if isinstance(value, bool) or value is None:
        return not value
    if isinstance(value, int):
        return value + rng.choice((-(2**32), -2, -1, 1, 2, 2**32))
    if isinstance(value, float):
        return -value
    if isinstance(value, str) and value:
        at = rng.randrange(len(value))
        return value[:at] + rng.choice(["", ".", "/", ":", "0", "..", value[at] * 2]) + value[at + 1 :]
    return weird_value(rng)
