"""py1e's fast paths: the C Fisher-Yates, keys packed as they are drawn, and resumed (tail-only) epochs.

Each is checked against a literal port of the reference's py1e (``docs/ordering.md``, "Shuffles"),
built only from numpy's own ``shuffle``, ``uniform`` and ``argsort``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.order import get_shuffle
from mds_core.order.remap import first_read_per_node
from mds_core.order.shuffle import fisher_yates, py1e, py1e_keys
from mds_core.order.shuffle.keysort import sort_packed_tail
from mds_core.order.shuffle.py1e_keys import PackedKeys
from mds_core.order.shuffle.spans import block_bounds, prologue

# py1e warns of blocks smaller than units, in small cases.
pytestmark = pytest.mark.filterwarnings("ignore:Shuffle block size was smaller than shard size:UserWarning")


def reference_py1e(sizes: list[int], c: int, seed: int, epoch: int, block: int) -> np.ndarray:
    """§2.5, step by step, with numpy's own methods."""
    (begins, ends), groups, rng = prologue(np.array(sizes, np.int64), c, seed, epoch)
    lo, hi = block_bounds(block)
    out = []
    for g0, g1 in groups:
        spans = list(zip(begins[g0:g1].tolist(), ends[g0:g1].tolist()))
        parts = []
        for b, e in spans:
            part = np.arange(b, e)
            rng.shuffle(part)
            parts.append(part)
        vals = np.concatenate(parts)
        m = len(vals)
        key = np.arange(m, dtype=np.float64)
        off = 0
        for b, e in spans:
            sz = e - b
            r = max((int(rng.integers(lo, hi)) - sz) / 2, 0.0)
            key[off : off + sz] += rng.uniform(max(-r, -off), min(r, m - off - sz), sz)
            off += sz
        out.append(vals[np.argsort(key)])
    return np.concatenate(out)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=12),
    c=st.integers(1, 4),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 3),
    block=st.integers(2, 1500),
    data=st.data(),
)
def test_full_and_resumed_epochs_match_the_reference(sizes, c, seed, epoch, block, data) -> None:
    n = sum(sizes)
    if n < c:
        return
    want = reference_py1e(sizes, c, seed, epoch, block)
    assert np.array_equal(get_shuffle("py1e", sizes, c, seed, epoch, block), want)
    bounds = [n * k // c for k in range(c + 1)]
    starts = [data.draw(st.integers(0, bounds[k + 1] - bounds[k] + 2)) for k in range(c)]
    got = get_shuffle("py1e", sizes, c, seed, epoch, block, starts=starts)
    for k in range(c):
        first = min(starts[k], bounds[k + 1] - bounds[k])
        assert np.array_equal(got[bounds[k] + first : bounds[k + 1]], want[bounds[k] + first : bounds[k + 1]])


def test_big_units_resumed_mid_epoch_match_the_reference() -> None:
    # Units past the threaded-shuffle threshold, some wholly before the resumption point.
    sizes = [150_000, 90_000, 200_000, 70_000, 120_000]
    want = reference_py1e(sizes, 2, 17, 1, 260_000)
    got = get_shuffle("py1e", sizes, 2, 17, 1, 260_000, starts=[230_000, 100_000])
    assert np.array_equal(got[230_000:315_000], want[230_000:315_000])
    assert np.array_equal(got[415_000:], want[415_000:])


def _sort_then_find_a_tie(*args, **kwargs) -> None:
    sort_packed_tail(*args, **kwargs)  # a tie shows only once the tail is sorted, after its units started shuffling


@pytest.mark.parametrize(
    ("give_up", "sizes", "seed", "epoch", "block", "start"),
    [
        # Ties are too rare to draw on purpose: make the packed sort give up as it does on a tie.
        (lambda *args, **kwargs: None, [3000, 2000, 4000], 5, 0, 6000, 6000),
        (_sort_then_find_a_tie, [100_000, 80_000, 120_000], 8, 2, 200_000, 150_000),
    ],
    ids=["before", "after-the-tail-is-announced"],
)
def test_exact_ties_fall_back_to_numpys_argsort(
    monkeypatch: pytest.MonkeyPatch, give_up, sizes: list[int], seed: int, epoch: int, block: int, start: int
) -> None:
    want = reference_py1e(sizes, 1, seed, epoch, block)
    monkeypatch.setattr(py1e, "sort_packed_tail", give_up)
    assert np.array_equal(get_shuffle("py1e", sizes, 1, seed, epoch, block), want)
    got = get_shuffle("py1e", sizes, 1, seed, epoch, block, starts=[start])
    assert np.array_equal(got[start:], want[start:])


def test_packed_keys_redraw_exactly_the_keys_they_packed() -> None:
    rng = np.random.default_rng(11)
    lengths = np.array([70_000, 0, 5, 30_000], np.int64)
    keys = PackedKeys(100_005)
    keys.draw(rng, lengths, 30_000, 50_000)
    full = keys.all_keys()
    assert np.array_equal(keys.packed >> np.uint64(keys.index_bits), full.astype(np.uint64))
    some = np.array([0, 1, 69_999, 70_000, 70_004, 70_005, 100_004], np.int64)
    assert np.array_equal(keys.keys_at(some), full[some])  # one by one (jumping ahead)
    many = np.arange(0, 70_000, 7, dtype=np.int64)
    assert np.array_equal(keys.keys_at(many), full[many])  # a whole unit drawn again
    assert keys.fixed_max[1] == -1  # the empty unit reaches nothing


def test_sort_packed_tail_gives_up_on_exact_ties_and_split_fixed_points() -> None:
    keys = np.array([5.0, 1.0, 5.0, 3.0])
    packed = (keys.astype(np.uint64) << np.uint64(2)) | np.arange(4, dtype=np.uint64)
    assert sort_packed_tail(packed.copy(), 0, 2, lambda i: keys[i]) is None
    # keys 1.0 and 1.5 share fixed point 1; a cut between them cannot be settled without numpy.
    keys = np.array([1.5, 1.0, 4.0, 3.0])
    packed = (keys.astype(np.uint64) << np.uint64(2)) | np.arange(4, dtype=np.uint64)
    assert sort_packed_tail(packed.copy(), 1, 2, lambda i: keys[i]) is None
    order = sort_packed_tail(packed.copy(), 2, 2, lambda i: keys[i])
    assert order is not None and order.tolist() == [3, 2]


def test_first_read_per_node_finds_each_nodes_first_position() -> None:
    positions = np.array([[[7, 8, -1], [3, 9, 4]]], np.int64)
    assert first_read_per_node(positions, 10, 1) == [3]
    assert first_read_per_node(positions, 10, 2) == [3, 2]  # CN 1 holds positions 5..9
    assert first_read_per_node(np.array([6, 7], np.int64), 10, 3) == [3, 3, 0]  # CNs 0 and 1 read nothing


def test_the_c_shuffle_is_built() -> None:
    # The Makefile's editable install compiles it; without it the library is correct but slower.
    assert fisher_yates.native is not None


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 3000),
    dtype=st.sampled_from([np.int32, np.int64, np.float64]),
    seed=st.integers(0, 2**32),
    pre_draw=st.booleans(),
)
def test_c_shuffle_and_skip_equal_numpys_shuffle(n: int, dtype, seed: int, pre_draw: bool) -> None:
    ours, theirs, skipped, replayed = (np.random.default_rng(seed) for _ in range(4))
    if pre_draw:  # leaves half of a 64-bit output buffered for the next 32-bit draw
        for rng in (ours, theirs, skipped, replayed):
            rng.integers(0, 7, dtype=np.uint32)
    want = np.arange(n).astype(dtype)
    got = want.copy()
    theirs.shuffle(want)
    fisher_yates.shuffle_in_place(ours, got)
    assert np.array_equal(got, want)
    assert ours.bit_generator.state == theirs.bit_generator.state
    fisher_yates.skip_shuffle(skipped, n)
    assert skipped.bit_generator.state == theirs.bit_generator.state
    with pytest.MonkeyPatch.context() as patch:  # without the C extension: a stride-0 shuffle
        patch.setattr(fisher_yates, "native", None)
        fisher_yates.skip_shuffle(replayed, n)
    assert replayed.bit_generator.state == theirs.bit_generator.state


def test_c_shuffle_of_a_big_array_and_of_unsupported_arrays() -> None:
    want = np.arange(3_000_000, dtype=np.int32)
    got = want.copy()
    np.random.default_rng(4).shuffle(want)
    fisher_yates.shuffle_in_place(np.random.default_rng(4), got)
    assert np.array_equal(got, want)
    strided = np.arange(20)[::2]  # not contiguous: numpy shuffles it, with the same result
    copy = strided.copy()
    fisher_yates.shuffle_in_place(np.random.default_rng(1), strided)
    np.random.default_rng(1).shuffle(copy)
    assert np.array_equal(strided, copy)


def test_colliding_fixed_point_keys_are_drawn_again_and_ordered(monkeypatch: pytest.MonkeyPatch) -> None:
    # 4M keys leave 19 fraction bits, so a few neighbours share a fixed-point key and are
    # re-sorted by their full keys, drawn again from the generator.
    sizes = [1_500_000, 1_300_000, 1_394_304]
    redrawn: list[int] = []
    keys_at = PackedKeys.keys_at

    def spy(self: PackedKeys, indices: np.ndarray) -> np.ndarray:
        redrawn.extend(indices.tolist())
        return keys_at(self, indices)

    monkeypatch.setattr(PackedKeys, "keys_at", spy)
    want = reference_py1e(sizes, 1, 9176, 0, 4_000_000)
    assert np.array_equal(get_shuffle("py1e", sizes, 1, 9176, 0, 4_000_000), want)
    assert redrawn
    got = get_shuffle("py1e", sizes, 1, 9176, 0, 4_000_000, starts=[2_000_000])
    assert np.array_equal(got[2_000_000:], want[2_000_000:])


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 100_000), min_size=1, max_size=5),
    seed=st.integers(0, 2**32),
    block=st.integers(2, 300_000),
)
def test_keys_packed_in_c_equal_keys_packed_by_numpy(lengths, seed, block) -> None:
    lengths = np.array(lengths, np.int64)
    cn_size = max(int(lengths.sum()), 1)
    lo, hi = block_bounds(block)
    results = []
    for native in (fisher_yates.native, None):
        with pytest.MonkeyPatch.context() as patch:  # a context: hypothesis runs the body many times per fixture
            patch.setattr(py1e_keys, "native", native)
            rng = np.random.default_rng(seed)
            keys = PackedKeys(cn_size)
            keys.draw(rng, lengths, lo, max(hi, lo + 1))
        results.append((keys.packed[: int(lengths.sum())].copy(), keys.fixed_max, rng.bit_generator.state))
    (packed_c, max_c, state_c), (packed_np, max_np, state_np) = results
    assert np.array_equal(packed_c, packed_np)
    assert max_c == max_np
    assert state_c == state_np
