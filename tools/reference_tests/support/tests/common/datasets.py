"""Sample generators the reference's tests write: a sequence, and random numbers with their names in words."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from streaming import MDSWriter

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


class SequenceDataset:
    """``{id: "000007", sample: 3 * 7 + offset}`` for indexes ``0..size-1``; iterating consumes it once."""

    def __init__(self, size: int = 100, column_names: list[str] | None = None, offset: int = 0) -> None:
        self.size = size
        self.column_names = column_names or ["id", "sample"]
        self.column_encodings = ["str", "int"]
        self.column_sizes = [None, 8]
        self.offset = offset
        self._index = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for {self.size} samples")
        return {self.column_names[0]: f"{index:06}", self.column_names[1]: 3 * index + self.offset}

    def __iter__(self) -> SequenceDataset:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._index >= self.size:
            raise StopIteration
        self._index += 1
        return self[self._index - 1]

    def get_sample_in_bytes(self, index: int) -> dict[str, Any]:
        """The sample as the MDS column bytes: UTF-8 for the id, little-endian int64 for the value."""
        sample = self[index]
        id_name, value_name = self.column_names
        return {id_name: sample[id_name].encode("utf-8"), value_name: np.int64(sample[value_name]).tobytes()}


def say(number: int) -> list[str]:
    """``123`` -> ``["one", "hundred", "twenty", "three"]``, for magnitudes under a billion."""
    if number < 0:
        return ["negative", *say(-number)]
    if number < 20:
        return [_ONES[number]]
    if number < 100:
        return [_TENS[number // 10 - 2]] + ([_ONES[number % 10]] if number % 10 else [])
    for unit, name in ((1_000_000, "million"), (1_000, "thousand"), (100, "hundred")):
        if number >= unit:
            head, rest = divmod(number, unit)
            return [*say(head), name] + (say(rest) if rest else [])
    raise AssertionError("unreachable")


class NumberAndSayDataset:
    """``{number: n, words: "n in words"}`` for random ``n``; setting ``seed`` restarts the same numbers."""

    def __init__(self, size: int = 100, column_names: list[str] | None = None, seed: int = 987) -> None:
        self.size = size
        self.column_names = column_names or ["number", "words"]
        self.column_encodings = ["int", "str"]
        self.column_sizes = [8, None]
        self._index = 0
        self.seed = seed

    @property
    def seed(self) -> int:
        return self._seed

    @seed.setter
    def seed(self, value: int) -> None:
        self._seed = value
        self._rng = np.random.default_rng(value)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> NumberAndSayDataset:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._index >= self.size:
            raise StopIteration
        self._index += 1
        sign = 1 if self._rng.random() < 0.8 else -1
        number = sign * int((10 ** self._rng.uniform(1, 4) - 10) ** 2)
        return {self.column_names[0]: number, self.column_names[1]: " ".join(say(number))}


def write_mds_dataset(
    out_root: str,
    columns: dict[str, str],
    samples: Iterable[dict[str, Any]],
    size_limit: int,
    compression: str | None = None,
    hashes: list[str] | None = None,
) -> None:
    with MDSWriter(out=out_root, columns=columns, compression=compression, hashes=hashes, size_limit=size_limit) as out:
        for sample in samples:
            out.write(sample)
