"""py1e's sort keys for one canonical node, packed for :mod:`mds_core.order.shuffle.keysort` as they are drawn.

The reference gives sample ``i`` of a CN the key ``i + u``, with ``u`` drawn by one
``uniform(low, high, unit_size)`` call per unit, and argsorts the CN's float keys. Here each
small chunk of draws is turned into fixed-point keys packed with their index straight away, so
no N-sized float array is ever held: fresh memory is what costs most when a process resumes.
Drawing a unit's uniforms in several calls gives the same numbers as one call, and where
fixed-point keys collide the full keys are drawn again from the unit's saved generator state.

Every key lies in ``[0, cn_size - 1]``: ``low >= -unit_offset`` and ``high <= cn_size -
unit_offset - unit_size``, and float rounding is monotone. So the fixed-point scale is known
before any draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mds_core.order.shuffle.fisher_yates import GeneratorState, generator_at, native
from mds_core.order.shuffle.keysort import packing_bits

_CHUNK = 1 << 16  # draws turned into packed keys at a time, so the work stays in cache
_DRAWS_PER_JUMP = 500  # a jump ahead costs about as much as this many draws


@dataclass(frozen=True)
class _UnitDraw:
    """What reproduces one unit's ``uniform(low, high, size)`` call."""

    state: GeneratorState  # the generator's state just before the call
    low: float
    high: float
    offset: int  # the unit's first index in the CN
    size: int


class PackedKeys:
    """A CN's py1e keys as ``floor(key * 2**fraction_bits) << index_bits | index``."""

    def __init__(self, cn_size: int) -> None:
        self.cn_size = cn_size
        self.index_bits, fraction_bits = packing_bits(cn_size, float(cn_size))
        self.scale = float(1 << fraction_bits)
        self.packed = np.empty(cn_size, np.uint64)
        self.units: list[_UnitDraw] = []
        self.fixed_max: list[int] = []  # per unit, its largest fixed-point key (-1 when empty or not drawn)
        self.skipped: list[int] = []  # units not drawn (outside the span asked for)
        self.block_smaller_than_unit = False

    def draw(
        self,
        rng: np.random.Generator,
        lengths: NDArray[np.int64],
        lo_size: int,
        hi_size: int,
        within: range | None = None,
    ) -> None:
        """The reference's draws, unit by unit: a window width, then one uniform shift per sample.

        Units wholly outside ``within`` (sample indices) are not drawn: the generator jumps over
        their draws, and :meth:`draw_again` fills them in if they turn out to be needed.
        """
        offset = 0
        bit_generator = rng.bit_generator
        for unit_size in lengths.tolist():
            width = int(rng.integers(lo_size, hi_size))
            reach = (width - unit_size) / 2
            if reach < 0:
                reach = 0.0
                self.block_smaller_than_unit = True
            low = max(-reach, -offset)
            high = min(reach, self.cn_size - offset - unit_size)
            # A draw of size 0 consumes nothing, as in the reference; the integers() above still counts.
            unit = _UnitDraw(rng.bit_generator.state, low, high, offset, unit_size)
            self.units.append(unit)
            far = within is not None and (offset + unit_size <= within.start or offset >= within.stop)
            if far and isinstance(bit_generator, np.random.PCG64):  # one output per uniform draw: O(log n) jumps
                self.skipped.append(len(self.fixed_max))
                self.fixed_max.append(-1)
                _jump(bit_generator, unit_size)
            else:
                self.fixed_max.append(self._draw_unit(rng, low, high, offset, unit_size))
            offset += unit_size

    def draw_again(self) -> None:
        """Draw every unit again from its saved generator state, those :meth:`draw` jumped over too.

        For a second sort: the first one left sample indices where its keys were.
        """
        for index, unit in enumerate(self.units):
            self.fixed_max[index] = self._draw_unit(
                generator_at(unit.state), unit.low, unit.high, unit.offset, unit.size
            )
        self.skipped = []

    def _draw_unit(self, rng: np.random.Generator, low: float, high: float, offset: int, size: int) -> int:
        if native is not None and size:
            with rng.bit_generator.lock:
                largest = native.pack_uniform_keys(
                    rng.bit_generator.capsule,
                    self.packed[offset : offset + size],
                    offset,
                    low,
                    high,
                    self.scale,
                    self.index_bits,
                )
            if largest is None:
                raise AssertionError(f"a py1e key of unit at {offset} fell outside [0, {self.cn_size})")
            return largest
        largest = -1
        positions = np.arange(_CHUNK, dtype=np.float64)
        indices = np.arange(_CHUNK, dtype=np.uint64)
        as_int = self.packed.view(np.int64)
        for start in range(offset, offset + size, _CHUNK):
            count = min(_CHUNK, offset + size - start)
            keys = rng.uniform(low, high, count)
            keys += positions[:count] + start  # the reference adds u to float(i); i + start is exact
            keys *= self.scale
            as_int[start : start + count] = keys  # truncation is floor: keys are >= 0
            largest = max(largest, int(as_int[start : start + count].max()))
            chunk = self.packed[start : start + count]
            chunk <<= np.uint64(self.index_bits)
            chunk |= indices[:count] + np.uint64(start)
        return largest

    def keys_at(self, indices: NDArray[np.int64]) -> NDArray[np.float64]:
        """The full scaled keys of some samples, drawn again from their units' generator states."""
        starts = np.array([unit.offset for unit in self.units], np.int64)
        unit_of = np.searchsorted(starts, indices, side="right") - 1
        keys = np.empty(len(indices), np.float64)
        for unit_id in np.unique(unit_of).tolist():
            unit = self.units[unit_id]
            picked = np.flatnonzero(unit_of == unit_id)
            keys[picked] = self._unit_keys(unit, indices[picked] - unit.offset)
        return keys

    def _unit_keys(self, unit: _UnitDraw, ks: NDArray[np.int64]) -> NDArray[np.float64]:
        generator = generator_at(unit.state)
        bit_generator = generator.bit_generator
        # PCG64 (default_rng's) jumps ahead in O(log k) and each uniform draw takes one output, so
        # a few keys are drawn one by one; many, or another generator, redraw the unit up to them.
        if len(ks) * _DRAWS_PER_JUMP > int(ks.max()) or not isinstance(bit_generator, np.random.PCG64):
            shifts = generator.uniform(unit.low, unit.high, int(ks.max()) + 1)[ks]
        else:
            shifts = np.empty(len(ks), np.float64)
            order = np.argsort(ks)
            drawn = 0  # draws made so far
            for slot in order.tolist():
                k = int(ks[slot])
                bit_generator.advance(k - drawn)
                shifts[slot] = generator.uniform(unit.low, unit.high)
                drawn = k + 1
        return ((ks + unit.offset).astype(np.float64) + shifts) * self.scale

    def all_keys(self) -> NDArray[np.float64]:
        """Every scaled key as one float array, for numpy's own argsort (exact ties)."""
        keys = np.arange(self.cn_size, dtype=np.float64)
        for unit in self.units:
            keys[unit.offset : unit.offset + unit.size] += generator_at(unit.state).uniform(
                unit.low, unit.high, unit.size
            )
        keys *= self.scale
        return keys

    def units_reaching(self, lowest_packed: int, highest_packed: int) -> list[int]:
        """Units with a key between the ones packed as ``lowest_packed`` and ``highest_packed`` (a superset is fine).

        A unit's keys are ``i + u`` with ``i >= offset`` and ``u >= low``; rounding is monotone, so
        none lies below ``(offset + low) * scale`` (less one for the floor).
        """
        lowest, highest = lowest_packed >> self.index_bits, highest_packed >> self.index_bits
        return [
            index
            for index, (unit, largest) in enumerate(zip(self.units, self.fixed_max))
            if largest >= lowest and math.floor((unit.offset + unit.low) * self.scale) - 1 <= highest
        ]

    def window_within(self, near: range, lowest_packed: int, highest_packed: int, reach: float) -> bool:
        """Whether the window's keys outrank every key of a sample before ``near`` and are outranked by those after.

        Sample ``i``'s key lies within ``reach`` of ``i``: the window's smallest key must exceed
        ``near.start + reach`` and its largest stay below ``near.stop - reach`` (where samples lie on that side).
        """
        lowest, highest = lowest_packed >> self.index_bits, highest_packed >> self.index_bits
        below = near.start == 0 or lowest > math.floor((near.start + reach) * self.scale)
        above = near.stop == self.cn_size or highest < math.floor((near.stop - reach) * self.scale)
        return below and above


def _jump(bit_generator: np.random.PCG64, draws: int) -> None:
    """Advance past ``draws`` uniform draws, keeping the buffered 32-bit half that ``advance`` would drop.

    ``integers`` below 2**32 draws 32-bit halves and keeps the spare one for the next call; the
    reference's next unit width takes it, so the jump must not lose it.
    """
    state = bit_generator.state
    bit_generator.advance(draws)
    jumped = bit_generator.state
    jumped["has_uint32"], jumped["uinteger"] = state["has_uint32"], state["uinteger"]
    bit_generator.state = jumped
