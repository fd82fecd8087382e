"""The packed key sort behind py1e must give exactly numpy's argsort order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.order.shuffle.keysort import packing_bits, sort_packed_tail


def argsort_keys(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys)`` through the packed sort, packing nonnegative keys as py1e does."""
    n = keys.size
    if n < 2:
        return np.arange(n, dtype=np.int64)
    index_bits, fraction_bits = packing_bits(n, float(keys.max()))
    scaled = keys * float(1 << fraction_bits)  # exact: a power of two
    packed = (np.floor(scaled).astype(np.uint64) << np.uint64(index_bits)) | np.arange(n, dtype=np.uint64)
    order = sort_packed_tail(packed, 0, index_bits, lambda indices: scaled[indices])
    return np.argsort(scaled) if order is None else order  # None: exact ties, numpy's own order


def _py1e_like_keys(n: int, reach: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = np.arange(n, dtype=np.float64) + rng.uniform(-reach, reach, n)
    return np.clip(keys, 0, n - 1)  # the clip makes exact ties at both ends


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), reach=st.sampled_from([0.0, 0.5, 3.0, 200.0, 1e4]), seed=st.integers(0, 2**32))
def test_matches_argsort_on_py1e_keys(n: int, reach: float, seed: int) -> None:
    keys = _py1e_like_keys(n, reach, seed)
    # Exactly equal keys (the clip makes some) come in numpy's own unstable order, as the reference's.
    assert np.array_equal(argsort_keys(keys), np.argsort(keys))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=400))
def test_matches_argsort_on_any_nonnegative_keys(values: list[float]) -> None:
    keys = np.array(values, np.float64)
    assert np.array_equal(argsort_keys(keys), np.argsort(keys))


def test_colliding_fixed_point_keys_are_ordered_by_full_key() -> None:
    # 2**20 keys packed with 21 index bits and ~22 value bits leave 21 fraction bits: keys 2**-30
    # apart collide in fixed point and must still come out in key order.
    n = 1 << 20
    keys = np.arange(n, dtype=np.float64)
    keys[10], keys[11] = 500.0 + 2.0**-30, 500.0
    keys[500] = 500.0 + 2.0**-31
    got = argsort_keys(keys)
    assert np.array_equal(got, np.argsort(keys))
    assert got[498:501].tolist() == [11, 500, 10]  # after the 498 smaller keys


def test_exactly_equal_keys_come_in_numpys_own_order() -> None:
    # The tie found at 100M samples (8 canonical nodes, 50k-sample shards, seed 9176): numpy's
    # argsort put the later index first, so the reference's epoch does too.
    rng = np.random.default_rng(3)
    keys = np.arange(1 << 20, dtype=np.float64) + rng.uniform(-3000, 3000, 1 << 20)
    keys = np.clip(keys, 0, None)
    keys[[700_001, 700_900, 701_500]] = keys[700_000]  # a run of four equal keys
    want = np.argsort(keys)
    assert np.array_equal(argsort_keys(keys), want)


@pytest.mark.parametrize("use_c", [True, False])
@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(2, 5000),
    reach=st.sampled_from([0.5, 3.0, 200.0]),
    seed=st.integers(0, 2**32),
    fraction=st.integers(8, 30),
)
def test_collisions_are_found_alike_in_c_and_numpy(use_c: bool, n: int, reach: float, seed: int, fraction: int) -> None:
    from mds_core.order.shuffle import fisher_yates, keysort

    # Few fraction bits make many fixed-point collisions; both passes must find them all.
    keys = np.floor(_py1e_like_keys(n, reach, seed) * 2.0**fraction) / 2.0**fraction
    index_bits = (n - 1).bit_length()
    packed = (np.floor(keys).astype(np.uint64) << np.uint64(index_bits)) | np.arange(n, dtype=np.uint64)
    with pytest.MonkeyPatch.context() as patch:  # a context: hypothesis runs the body many times per fixture
        patch.setattr(keysort, "native", fisher_yates.native if use_c else None)
        order = keysort.sort_packed_tail(packed, 0, index_bits, lambda i: keys[i])
    want = np.argsort(keys)
    if order is None:  # exact ties: the caller asks numpy
        assert len(np.unique(keys)) < n
    else:
        assert np.array_equal(order, want)
