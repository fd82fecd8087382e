"""Mixing schedules: streams weighted per phase of a run, the phases starting at given steps.

A scheduled run is a sequence of global batches (steps) of a fixed size ``G``. Step ``t`` belongs to
the last phase that starts at or before it, and its composition follows that phase's weights
exactly: stream ``s`` gives ``floor(G·p_s)`` or ``ceil(G·p_s)`` samples (``p_s`` its normalised
weight), and over every ``A`` steps of a phase (``A`` the weights' common denominator) exactly its
share. Each stream hands out its samples in its own order (``stream_order``), without replacement,
continuing across phases; an exhausted stream starts its next pass, shuffled with the next seed.

Nothing here depends on the world: ranks take slices of each global batch, so any world with the same
``G`` sees the same batches. A step's composition is arithmetic on integers (below), and the samples a
stream gave through any step are a closed form of floor sums, so resuming costs the same at step 10
as at step 10⁶, and a state is one cursor per stream.

The composition, as systematic sampling: lay the streams' weights end to end as integer lengths
``a_s`` on ``[0, A)`` and scale by ``G``; the ``G`` points ``k·A + τ`` (``k < G``) fall ``floor`` or
``ceil`` of ``G·a_s/A`` times into stream ``s``'s interval. ``τ = j·u mod A`` at the phase's ``j``-th
step, with ``u`` coprime to ``A`` near ``A/φ``: every offset once per ``A`` steps, spread evenly.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError
from mds_core.order.shuffle import get_shuffle

UNITS = ("step", "sample")
Shared = Callable[[str, Callable[[], NDArray[np.int64]]], NDArray[np.int64]]
_GOLDEN = Fraction(1_000_000_000_000, 1_618_033_988_750)  # 1/φ, to 12 digits: spreads the offsets evenly


@dataclass(frozen=True)
class Phase:
    """From ``start`` (a step, or a sample count with ``Schedule(unit="sample")``) on, draw streams by ``weights``.

    Args:
        start: the first step (or sample) of the phase; the first phase starts at 0.
        weights: stream names (``Stream(name=...)``) to non-negative numbers; only their ratios
            matter. A stream left out, or weighted 0, gives no samples in this phase.
    """

    start: int
    weights: Mapping[str, float]

    def __post_init__(self) -> None:
        if not isinstance(self.start, int) or isinstance(self.start, bool) or self.start < 0:
            raise ConfigurationError(f"a phase's start must be a non-negative integer, got {self.start!r}")
        if not isinstance(self.weights, Mapping) or not self.weights:
            raise ConfigurationError(f"the phase at {self.start} needs weights: a mapping of stream names to numbers")
        for name, weight in self.weights.items():
            if (
                not isinstance(weight, (int, float))
                or isinstance(weight, bool)
                or not math.isfinite(weight)
                or weight < 0
            ):
                raise ConfigurationError(
                    f"the phase at {self.start}: stream {name!r} has weight {weight!r}; use a non-negative number"
                )
        if not any(self.weights.values()):
            raise ConfigurationError(f"the phase at {self.start} gives every stream weight 0: nothing to draw")


@dataclass(frozen=True)
class Schedule:
    """A mixing schedule for ``StreamingDataset(schedule=...)``: weights that change at given steps.

    Args:
        phases: the phases in order of ``start``; the first starts at 0.
        unit: what a phase's ``start`` counts: ``"step"`` (default) or ``"sample"``.
    """

    phases: Sequence[Phase]
    unit: str = "step"

    def __post_init__(self) -> None:
        phases = tuple(self.phases)
        if self.unit not in UNITS:
            raise ConfigurationError(f"a schedule's unit must be one of {UNITS}, got {self.unit!r}")
        if not phases or phases[0].start != 0:
            raise ConfigurationError("a schedule's first phase must start at 0")
        starts = [phase.start for phase in phases]
        if starts != sorted(set(starts)):
            raise ConfigurationError(f"phase starts must increase: got {starts}")
        object.__setattr__(self, "phases", phases)

    @property
    def stream_names(self) -> list[str]:
        """Every stream a phase names, in the order first named."""
        return list(dict.fromkeys(name for phase in self.phases for name in phase.weights))

    def to_json(self) -> dict[str, Any]:
        """The schedule as JSON: its unit and its phases."""
        return {"unit": self.unit, "phases": [{"start": p.start, "weights": dict(p.weights)} for p in self.phases]}

    @classmethod
    def from_json(cls, obj: Any) -> Schedule:
        """A schedule from ``to_json``'s form.

        Args:
            obj: the form as a dict, or its JSON text.
        """
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as error:
                raise ConfigurationError(f"a schedule must be JSON: {error}") from None
        if not isinstance(obj, Mapping) or not isinstance(obj.get("phases"), list):
            raise ConfigurationError(
                'a schedule looks like {"unit": "step", "phases": [{"start": 0, "weights": {...}}]}'
            )
        phases = []
        for phase in obj["phases"]:
            if not isinstance(phase, Mapping) or set(phase) != {"start", "weights"}:
                raise ConfigurationError(f"each phase has exactly a start and weights, got {phase!r}")
            phases.append(Phase(start=phase["start"], weights=phase["weights"]))
        return cls(phases=phases, unit=obj.get("unit", "step"))


class PhaseMix:
    """One phase's composition of every step, over the dataset's streams (by index)."""

    def __init__(self, weights: Sequence[float], global_batch: int) -> None:
        exact = [Fraction(str(float(w))) for w in weights]  # 0.1 is 1/10, not the nearest binary fraction
        scale = math.lcm(*(w.denominator for w in exact))
        lengths = [int(w * scale) for w in exact]
        divisor = math.gcd(*lengths)
        self.lengths = [length // divisor for length in lengths]
        self.total = sum(self.lengths)  # A
        self.global_batch = global_batch  # G
        ends = [sum(self.lengths[: s + 1]) * global_batch for s in range(len(self.lengths))]
        self._bounds = [0, *ends]  # stream s owns [bounds[s], bounds[s + 1]) on [0, A·G)
        self.step = _coprime_near(self.total, self.total * _GOLDEN)  # u

    def counts(self, j: int) -> list[int]:
        """How many samples each stream gives at the phase's ``j``-th step (they sum to ``G``)."""
        offset = j * self.step % self.total
        edges = [-((offset - bound) // self.total) for bound in self._bounds]  # ceil((bound - τ) / A)
        return [high - low for low, high in zip(edges, edges[1:])]

    def given_through(self, j: int) -> list[int]:
        """How many samples each stream gave in the phase's first ``j`` steps, in O(log A) each."""
        below = [_floor_sum(j, self.total, self.step, -bound) for bound in self._bounds]
        return [low - high for low, high in zip(below, below[1:])]


def _coprime_near(modulus: int, target: Fraction) -> int:
    candidate = max(1, round(target)) % modulus if modulus > 1 else 0
    while modulus > 1 and math.gcd(candidate, modulus) != 1:
        candidate = (candidate + 1) % modulus
    return candidate


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a·i + b) / m) for i in range(n))`` in O(log m) (a ≥ 0; any b)."""
    total = 0
    if b < 0:  # shift b into [0, m): each term drops by the same whole number
        shift = -(b // m)
        b += shift * m
        total -= shift * n
    while n:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        last = a * n + b
        if last < m:
            break
        n, b, m, a = last // m, last % m, a, m
    return total


@dataclass(frozen=True)
class Position:
    """Where a scheduled run is: its next step, and how many samples each stream has given (all passes)."""

    step: int
    given: Mapping[str, int]


class ScheduledOrder:
    """The global batches of a schedule over streams named ``names``, with ``shard_sizes[s]`` per stream.

    ``global_batch`` is ``G``; ``shuffle``, ``shuffle_algo``, ``shuffle_seed`` and ``block_size`` order
    each stream's passes as the dataset's shuffle would order that stream alone on one canonical node.
    ``shared(name, compute)``, where given, computes a pass's permutation once for every process that
    asks (a node's job directory) instead of once per process.
    """

    def __init__(
        self,
        schedule: Schedule,
        names: Sequence[str],
        shard_sizes: Sequence[Sequence[int]],
        global_batch: int,
        *,
        shuffle: bool = False,
        shuffle_algo: str = "py1e",
        shuffle_seed: int = 9176,
        block_size: int = 1 << 22,
        shared: Shared | None = None,
    ) -> None:
        self.shared = shared
        unknown = [name for name in schedule.stream_names if name not in names]
        if unknown:
            raise ConfigurationError(
                f"the schedule names streams {unknown} that the dataset lacks; it has {list(names)}"
            )
        unused = [name for name in names if name not in schedule.stream_names]
        if unused:
            raise ConfigurationError(
                f"streams {unused} have no weight in any phase of the schedule: weight or drop them"
            )
        self.names, self.global_batch = list(names), global_batch
        self.shard_sizes = [list(sizes) for sizes in shard_sizes]
        self.sizes = [sum(sizes) for sizes in self.shard_sizes]
        self.offsets = [sum(self.sizes[:s]) for s in range(len(self.sizes))]  # global id of each stream's sample 0
        self.shuffle, self.shuffle_algo, self.shuffle_seed, self.block_size = (
            shuffle,
            shuffle_algo,
            shuffle_seed,
            block_size,
        )
        self.starts = [_start_step(phase, schedule.unit, global_batch) for phase in schedule.phases]
        self.mixes = [
            PhaseMix([phase.weights.get(n, 0.0) for n in self.names], global_batch) for phase in schedule.phases
        ]

    def phase_at(self, step: int) -> int:
        """The index of the phase that step ``step`` is in."""
        return max(p for p, start in enumerate(self.starts) if start <= step)

    def advance(self, position: Position, step: int) -> Position:
        """The position at ``step`` (≥ ``position.step``), in O(phases · streams · log A)."""
        if step < position.step:
            raise ConfigurationError(f"cannot go back from step {position.step} to step {step}")
        given = [position.given.get(name, 0) for name in self.names]
        at = position.step
        while at < step:
            p = self.phase_at(at)
            end = min(step, self.starts[p + 1]) if p + 1 < len(self.starts) else step
            before, after = (self.mixes[p].given_through(t - self.starts[p]) for t in (at, end))
            given = [g + b - a for g, a, b in zip(given, before, after)]
            at = end
        return Position(step, dict(zip(self.names, given)))

    def global_batches(
        self, position: Position, end: int, every: int = 1, first: int = 0
    ) -> Iterator[tuple[int, NDArray[np.int64]]]:
        """Yield ``(step, ids)``, each step's ``G`` global sample ids, for a DataLoader worker's steps.

        Those are the steps before ``end`` that are ``first`` past a multiple of ``every`` from
        ``position.step``.

        A batch holds each stream's samples in the stream's order, streams in turn; with ``shuffle``,
        they are spread over the batch by a fixed stride, so that every rank's slice gets a mix.
        Steps go in blocks: a stream's samples for a whole block are one span of its order.
        """
        passes = StreamPasses(self)
        given = np.array([position.given.get(name, 0) for name in self.names], np.int64)
        spread = _stride_permutation(self.global_batch) if self.shuffle else None
        step = position.step
        while step < end:
            p = self.phase_at(step)
            block_end = min(end, step + _BLOCK_STEPS, *(s for s in self.starts if s > step))
            counts = np.array([self.mixes[p].counts(t - self.starts[p]) for t in range(step, block_end)], np.int64)
            drawn = [passes.take(s, int(g), int(n)) for s, (g, n) in enumerate(zip(given, counts.sum(0)))]
            starts = np.cumsum(counts, axis=0) - counts
            for k, t in enumerate(range(step, block_end)):
                if (t - position.step) % every == first:
                    ids = np.concatenate([d[i : i + n] for d, i, n in zip(drawn, starts[k], counts[k])])
                    yield t, ids[spread] if spread is not None else ids
            given += counts.sum(0)
            step = block_end


_BLOCK_STEPS = 64


def _stride_permutation(size: int) -> NDArray[np.int64]:
    """Slot ``k`` takes element ``k·m mod size``, with ``m`` coprime to ``size`` near ``size/φ``."""
    return np.arange(size, dtype=np.int64) * _coprime_near(size, size * _GOLDEN) % max(size, 1)


def _start_step(phase: Phase, unit: str, global_batch: int) -> int:
    if unit == "step":
        return phase.start
    if phase.start % global_batch:
        raise ConfigurationError(
            f"a phase starts at sample {phase.start}, which is not a step boundary: the global batch is {global_batch} "
            f"samples; start it at {phase.start // global_batch * global_batch} or {-(-phase.start // global_batch) * global_batch}"
        )
    return phase.start // global_batch


class StreamPasses:
    """Each stream's samples in its own order, pass after pass (pass ``n`` shuffled with the stream's seed + n).

    A stream's seed is the run's ``shuffle_seed`` plus a hash of its name, so its order does not depend
    on where it sits in the list of streams, which may change when a run resumes with streams added or
    dropped. The latest pass's permutation is kept per stream.
    """

    def __init__(self, order: ScheduledOrder) -> None:
        self.order = order
        self._passes: dict[int, tuple[int, NDArray[np.int64]]] = {}

    def take(self, stream: int, start: int, count: int) -> NDArray[np.int64]:
        """Global ids of the stream's samples ``start .. start + count - 1`` (counting over all passes)."""
        size, offset = self.order.sizes[stream], self.order.offsets[stream]
        parts = []
        while count > 0:
            number, position = divmod(start, size)
            taken = min(count, size - position)
            parts.append(offset + self._positions(stream, number, position, taken))
            start, count = start + taken, count - taken
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def _positions(self, stream: int, number: int, position: int, count: int) -> NDArray[np.int64]:
        order = self.order
        if not order.shuffle:
            return np.arange(position, position + count, dtype=np.int64)
        cached = self._passes.get(stream)
        if cached is None or cached[0] != number:
            seed = (order.shuffle_seed + zlib.crc32(order.names[stream].encode())) % (1 << 31)

            def compute() -> NDArray[np.int64]:
                return get_shuffle(order.shuffle_algo, order.shard_sizes[stream], 1, seed, number, order.block_size)

            settings = (
                f"{order.shuffle_algo}-{seed}-{order.block_size}-{zlib.crc32(repr(order.shard_sizes[stream]).encode())}"
            )
            shuffled = order.shared(f"pass-{settings}-{number}", compute) if order.shared else compute()
            cached = self._passes[stream] = (number, shuffled)
        return cached[1][position : position + count]
