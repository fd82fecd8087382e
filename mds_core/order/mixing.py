"""Streams: proportion / repeat / choose, epoch size, and resampling into shuffle units.

Bit-exact with Mosaic Streaming 0.13 (``Stream.apply_weights``, ``get_sampling`` and
``StreamingDataset.resample_streams``); ``docs/ordering.md``, "Stream mixing", describes the rules. Every
random draw below comes from a fresh ``numpy.random.default_rng(int)`` created for one purpose, in
the same order as the reference, because the sample order depends on the exact random stream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mds_core.errors import ConfigurationError

SAMPLING_METHODS = ("balanced", "fixed")
WEIGHT_NAMES = ("proportion", "repeat", "choose")
_EPOCH_SIZE_UNITS = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}  # checked in this order


# --------------------------------------------------------------------------------------------------
# epoch_size


def parse_epoch_size(value: int | float | str | None) -> int | None:
    """``100``, ``"100"``, ``"100k"``, ``"1.5M"``, ``"2b"`` or ``"1t"`` as a sample count (powers of 1000).

    ``None`` stays ``None``. As in the reference, an epoch size of 0 later means "not given".
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigurationError(f"epoch_size must be an integer or a string like '100k', got {value!r}")
    if isinstance(value, (int, np.integer)):
        size = int(value)
    elif isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ConfigurationError(f"epoch_size must be a finite number of samples, got {value!r}")
        size = int(value)
    elif isinstance(value, str):
        size = _parse_abbreviated_count(value)
    else:
        raise ConfigurationError(f"epoch_size must be an integer or a string like '100k', got {type(value).__name__}")
    if size < 0:
        raise ConfigurationError(f"epoch_size cannot be negative, got {value!r}")
    return size


def _parse_abbreviated_count(text: str) -> int:
    normalized = text.strip().lower()
    for suffix, unit in _EPOCH_SIZE_UNITS.items():
        if normalized.endswith(suffix):
            try:
                return int(float(normalized[: -len(suffix)]) * unit)
            except (ValueError, OverflowError):
                break
    else:
        # The reference accepts plain digits only here: "1.5" needs a suffix ("1.5k") or an int.
        if normalized.isascii() and normalized.isdigit():
            return int(normalized)
    raise ConfigurationError(
        f"Unsupported value/suffix {text!r} for epoch_size: use an integer number of samples or a number followed by "
        f"one of {list(_EPOCH_SIZE_UNITS)} (thousand, million, billion, trillion), e.g. '100k'"
    )


# --------------------------------------------------------------------------------------------------
# Stream weights -> choose per stream


@dataclass(frozen=True)
class StreamWeights:
    """What one stream asked for: at most one of ``proportion`` (relative), ``repeat`` or ``choose``."""

    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None

    def __post_init__(self) -> None:
        given = [name for name in WEIGHT_NAMES if getattr(self, name) is not None]
        if len(given) > 1:
            raise ConfigurationError(
                f"a stream may set at most one of proportion, repeat and choose; got {', '.join(given)}"
            )
        for name in ("proportion", "repeat"):
            value = getattr(self, name)
            if value is not None and not _is_non_negative_real(value):
                raise ConfigurationError(f"stream {name} must be a non-negative number, got {value!r}")
        if self.choose is not None and not _is_non_negative_integral(self.choose):
            raise ConfigurationError(f"stream choose must be a non-negative integer, got {self.choose!r}")

    @property
    def is_relative(self) -> bool:
        """Whether the stream's weight is a proportion of the epoch."""
        return self.proportion is not None

    @property
    def is_unspecified(self) -> bool:
        """Whether the stream sets no weight at all."""
        return self.proportion is None and self.repeat is None and self.choose is None

    @classmethod
    def of(cls, weights: Any) -> StreamWeights:
        """Accept ``None``, a StreamWeights, a mapping with weight keys, or a Stream-like object."""
        if weights is None:
            return cls()
        if isinstance(weights, StreamWeights):
            return weights
        if isinstance(weights, Mapping):
            unknown = set(weights) - set(WEIGHT_NAMES)
            if unknown:
                raise ConfigurationError(
                    f"unknown stream weight key(s) {sorted(unknown)}; use {', '.join(WEIGHT_NAMES)}"
                )
            return cls(**weights)
        return cls(**{name: getattr(weights, name, None) for name in WEIGHT_NAMES})


def _is_non_negative_real(value: Any) -> bool:
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and bool(value >= 0)  # a numpy number compares to a numpy bool
    )


def _is_non_negative_integral(value: Any) -> bool:
    return _is_non_negative_real(value) and float(value).is_integer()


@dataclass(frozen=True)
class StreamMix:
    """Derived weights of every stream (what the reference writes back onto its Streams)."""

    choose: tuple[int, ...]
    proportion: tuple[float, ...]
    repeat: tuple[float, ...]

    @property
    def epoch_size(self) -> int:
        """Samples in one epoch: all streams' chosen samples."""
        return sum(self.choose)


def apply_weights(
    stream_sizes: Sequence[int], weights: Sequence[StreamWeights | None], epoch_size: int | None, seed: int
) -> StreamMix:
    """How many samples each stream contributes to an epoch (reference ``Stream.apply_weights``).

    ``seed`` is the dataset's ``shuffle_seed`` at construction; ``epoch_size`` of ``None`` or 0
    means "not given".
    """
    sizes = np.asarray(stream_sizes, dtype=np.int64)
    _check_stream_sizes(sizes)
    all_weights = [StreamWeights.of(w) for w in weights]
    if len(all_weights) != len(sizes):
        raise ConfigurationError(f"got weights for {len(all_weights)} streams but there are {len(sizes)} streams")
    relative = _weights_are_relative(all_weights)
    if relative:
        proportion = _normalized([w.proportion for w in all_weights if w.proportion is not None])  # all are
        choose = _split_by_proportion(epoch_size or int(sizes.sum()), proportion, seed)
    elif epoch_size and all(w.is_unspecified for w in all_weights):
        # Unweighted streams resized to epoch_size keep their natural proportions.
        proportion = _normalized(sizes)
        choose = _split_by_proportion(epoch_size, proportion, seed)
    else:
        if epoch_size:
            raise ConfigurationError(
                "epoch_size can only be combined with relative stream weights (proportion) or with "
                "unweighted streams; drop epoch_size or replace repeat/choose by proportion"
            )
        choose = np.array([_absolute_choose(w, int(n)) for w, n in zip(all_weights, sizes)], np.int64)
        proportion = choose / max(int(choose.sum()), 1)
    if int(choose.sum()) == 0:
        raise ConfigurationError("the stream weights select no samples at all: raise a proportion, repeat or choose")
    return StreamMix(
        choose=tuple(int(c) for c in choose),
        proportion=tuple(float(p) for p in proportion),
        repeat=tuple(float(r) for r in choose / sizes),
    )


def _normalized(weights: Sequence[float] | NDArray[Any]) -> NDArray[np.float64]:
    values = np.array(weights, np.float64)
    total = values.sum()
    if total <= 0:
        raise ConfigurationError("stream proportions sum to 0: give at least one stream a positive proportion")
    values /= total
    return values


def _check_stream_sizes(sizes: NDArray[np.int64]) -> None:
    if sizes.ndim != 1 or len(sizes) == 0:
        raise ConfigurationError("a dataset needs at least one stream")
    empty = np.flatnonzero(sizes <= 0)
    if len(empty):
        raise ConfigurationError(
            f"stream {int(empty[0])} contains no samples: check its index.json or remove the stream"
        )


def _weights_are_relative(weights: Sequence[StreamWeights]) -> bool:
    relative = weights[0].is_relative
    for stream_id, w in enumerate(weights):
        if w.is_relative != relative:
            raise ConfigurationError(
                f"relative (proportion) and absolute (repeat, choose, none) stream weights cannot be "
                f"mixed (stream {stream_id} differs from stream 0): weight every stream the same way"
            )
    return relative


def _split_by_proportion(epoch_size: int, proportions: NDArray[np.float64], seed: int) -> NDArray[np.int64]:
    """floor(E * p) per stream (p normalized); the shortfall goes +1 to streams drawn by ``RNG(seed)``."""
    choose = (epoch_size * proportions).astype(np.int64)
    shortfall = epoch_size - int(choose.sum())
    if shortfall < 0 or shortfall > len(choose):
        raise ConfigurationError(f"epoch_size {epoch_size} is too large to split exactly over the streams")
    picked = np.random.default_rng(seed).choice(len(choose), shortfall, False)
    choose[picked] += 1
    return choose


def _absolute_choose(weights: StreamWeights, stream_size: int) -> int:
    if weights.repeat is not None:
        return int(float(weights.repeat) * stream_size)  # truncation, as the reference
    if weights.choose is not None:
        return int(weights.choose)
    return stream_size


# --------------------------------------------------------------------------------------------------
# choose per stream -> choose per shard -> shuffle units and small ids


def get_sampling(
    samples_per_shard: Sequence[int] | NDArray[np.int64],
    choose: int,
    granularity: int,
    seed: int,
    epoch: int,
    use_epoch: bool,
) -> NDArray[np.int64]:
    """How many samples to draw from each shard of one stream (reference ``sampling.get_sampling``).

    Whole repeats take every shard ``choose // total`` times; the remainder is filled by granules of
    ``granularity`` samples taken in the order of ``RNG(seed + epoch if use_epoch else seed)``.
    """
    sizes = np.asarray(samples_per_shard, dtype=np.int64)
    _check_sampling_args(choose, granularity, seed, epoch)
    total = int(sizes.sum())
    if total <= 0:
        raise ConfigurationError("cannot sample from a stream without samples")
    whole, remainder = divmod(int(choose), total)
    per_shard = sizes * whole
    if not remainder:
        return per_shard
    pick_shard, pick_size = _granules(sizes, granularity)
    order = np.random.default_rng(seed + epoch if use_epoch else seed).permutation(len(pick_size))
    # Granules are taken whole, in this order, until the remainder is used up; the last one may be
    # cut short. Only that prefix of the order matters.
    taken_through = np.cumsum(pick_size[order])
    used = int(np.searchsorted(taken_through, remainder)) + 1
    taken = pick_size[order[:used]].copy()
    taken[-1] -= int(taken_through[used - 1]) - remainder
    per_shard += np.bincount(pick_shard[order[:used]], weights=taken, minlength=len(sizes)).astype(np.int64)
    return per_shard


def _check_sampling_args(choose: int, granularity: int, seed: int, epoch: int) -> None:
    if choose < 0:
        raise ConfigurationError(f"choose must be a non-negative integer, got {choose}")
    if granularity <= 0:
        raise ConfigurationError(f"sampling_granularity must be a positive integer, got {granularity}")
    if seed < 0:
        raise ConfigurationError(f"shuffle_seed must be a non-negative integer, got {seed}")
    if epoch < 0:
        raise ConfigurationError(f"epoch must be a non-negative integer, got {epoch}")


def _granules(sizes: NDArray[np.int64], granularity: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Shard id and size of each granule: ceil(size / g) granules per shard, the last one smaller."""
    per_shard = (sizes + granularity - 1) // granularity
    shard_of_granule = np.repeat(np.arange(len(sizes)), per_shard)
    size_of_granule = np.full(int(per_shard.sum()), granularity, np.int64)
    # Written exactly like the reference, on purpose: a 0-sample shard has no granule, so its "last
    # granule" index points at the previous shard's last one (or the very last, for a leading empty
    # shard) and overwrites its size with `granularity`. That changes which samples are drawn, so a
    # compatible order must keep it.
    last = np.cumsum(per_shard) - 1
    size_of_granule[last] = sizes - (per_shard - 1) * granularity
    return shard_of_granule, size_of_granule


def sampling_rngs_use_epoch(sampling_method: str, shuffle: bool) -> tuple[bool, bool]:
    """Whether (granule order, partial-repeat choice) are seeded with ``seed + epoch``.

    The asymmetry is the reference's: granule order follows ``shuffle and balanced`` but the
    partial-repeat choice follows ``balanced`` alone, so with ``shuffle=False`` balanced
    down-sampling still picks a different set every epoch (reference issue #749).
    """
    check_sampling_method(sampling_method)
    balanced = sampling_method == "balanced"
    return shuffle and balanced, balanced


def check_sampling_method(sampling_method: str) -> None:
    """Refuse a sampling method other than ``balanced`` or ``fixed``."""
    if sampling_method not in SAMPLING_METHODS:
        raise ConfigurationError(
            f"Invalid sampling method: {sampling_method!r}; sampling_method must be one of {', '.join(SAMPLING_METHODS)}"
        )


def resample_streams(
    shard_sizes: Sequence[Sequence[int]],
    choose_per_stream: Sequence[int],
    *,
    seed: int,
    epoch: int,
    sampling_method: str = "balanced",
    sampling_granularity: int = 1,
    shuffle: bool = False,
    stream_id: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Shuffle units and ``small_per_big`` for one epoch (reference ``resample_streams``).

    ``shard_sizes`` lists every stream's shard sizes (all streams, for the global sample ids);
    ``stream_id`` restricts the result to one stream, as per-stream batching does. Each shard chosen
    ``k`` times out of ``n`` samples becomes ``k // n`` units of ``n`` plus one unit of ``k % n``;
    ``small_per_big[i]`` is the global sample id at epoch position ``i``.
    """
    granule_epoch, partial_epoch = sampling_rngs_use_epoch(sampling_method, shuffle)
    offsets = _sample_offsets(shard_sizes)
    streams = range(len(shard_sizes)) if stream_id is None else [stream_id]
    sizes = [np.asarray(shard_sizes[s], np.int64) for s in streams]
    chosen = [
        get_sampling(sizes_s, int(choose_per_stream[s]), sampling_granularity, seed, epoch, granule_epoch)
        for s, sizes_s in zip(streams, sizes)
    ]
    n = np.concatenate(sizes)
    k = np.concatenate(chosen)
    offset = np.concatenate([offsets[s] for s in streams])
    # One generator for all shards of this call, consumed only by partial repeats, in shard order.
    partial_rng = np.random.default_rng(seed + epoch if partial_epoch else seed)
    return _shuffle_units(n, k), _small_per_big(n, k, offset, partial_rng)


def _sample_offsets(shard_sizes: Sequence[Sequence[int]]) -> list[NDArray[np.int64]]:
    flat = np.concatenate([np.asarray(s, np.int64) for s in shard_sizes])
    starts = np.cumsum(flat) - flat
    bounds = np.cumsum([0] + [len(s) for s in shard_sizes])
    return [starts[bounds[i] : bounds[i + 1]] for i in range(len(shard_sizes))]


def _full_and_partial(n: NDArray[np.int64], k: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    full: NDArray[np.int64] = np.where(n > 0, k // np.maximum(n, 1), 0)  # a 0-sample shard is never chosen
    return full, k - full * n


def _shuffle_units(n: NDArray[np.int64], k: NDArray[np.int64]) -> NDArray[np.int64]:
    full, partial = _full_and_partial(n, k)
    units_per_shard = full + (partial > 0)
    units = np.repeat(n, units_per_shard)
    has_partial = partial > 0
    units[np.cumsum(units_per_shard)[has_partial] - 1] = partial[has_partial]
    return units


def _small_per_big(
    n: NDArray[np.int64], k: NDArray[np.int64], offset: NDArray[np.int64], partial_rng: np.random.Generator
) -> NDArray[np.int64]:
    full, partial = _full_and_partial(n, k)
    segment_start = np.cumsum(k) - k
    small = np.arange(int(k.sum()), dtype=np.int64)
    small -= np.repeat(segment_start, k)  # position inside the shard's segment
    if np.any(full > 1):
        small %= np.repeat(np.maximum(n, 1), k)  # full repeats wrap around the shard; partials are overwritten
    small += np.repeat(offset, k)
    for j in np.flatnonzero(partial):
        start = int(segment_start[j] + full[j] * n[j])
        picks = partial_rng.choice(int(n[j]), int(partial[j]), False)
        small[start : start + int(partial[j])] = np.sort(offset[j] + picks)
    return small
