"""get_shuffle against the reference (fixtures, ordering.md Appendix A) and its promised properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.errors import ConfigurationError
from mds_core.order import SHUFFLE_ALGOS, get_shuffle
from mds_core.order.shuffle.fisher_yates import UnitShuffler, shuffle_slices
from tests.order.golden_cases import check_case, golden

# py1e warns when the block is smaller than a unit; that is expected in small cases.
pytestmark = pytest.mark.filterwarnings("ignore:Shuffle block size was smaller than shard size:UserWarning")

CASES = golden("shuffle")["cases"]
CN_ALGOS = [algo for algo in SHUFFLE_ALGOS if algo != "naive"]
ARG_NAMES = ("algo", "shard_sizes", "num_canonical_nodes", "seed", "epoch", "block_size")


def _case_id(i: int, case: dict) -> str:
    algo, c, s, e = case["algo"], case["num_canonical_nodes"], case["block_size"], case["epoch"]
    return f"{i}-{algo}-C{c}-S{s}-e{e}-n{len(case['shard_sizes'])}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(i, c) for i, c in enumerate(CASES)])
def test_matches_reference_fixture(case: dict) -> None:
    check_case(case, lambda: get_shuffle(*[case[name] for name in ARG_NAMES]), "perm")


APPENDIX_A = {
    ("naive", 1, 0): [3, 8, 12, 13, 14, 16, 10, 15, 1, 6, 0, 7, 4, 18, 5, 19, 17, 2, 9, 11],
    ("naive", 2, 0): [3, 8, 12, 13, 14, 16, 10, 15, 1, 6, 0, 7, 4, 18, 5, 19, 17, 2, 9, 11],
    ("naive", 1, 1): [15, 8, 18, 10, 13, 0, 16, 11, 7, 3, 9, 4, 19, 14, 17, 12, 1, 6, 5, 2],
    ("naive", 2, 1): [15, 8, 18, 10, 13, 0, 16, 11, 7, 3, 9, 4, 19, 14, 17, 12, 1, 6, 5, 2],
    ("py1s", 1, 0): [14, 18, 15, 17, 19, 16, 9, 8, 11, 12, 10, 13, 0, 2, 1, 6, 5, 3, 7, 4],
    ("py1s", 1, 1): [3, 4, 6, 5, 7, 9, 8, 1, 0, 2, 19, 17, 14, 15, 18, 16, 12, 11, 10, 13],
    ("py1s", 2, 0): [8, 9, 14, 18, 15, 17, 16, 2, 1, 0, 7, 6, 4, 5, 3, 10, 13, 11, 12, 19],
    ("py1s", 2, 1): [2, 0, 1, 17, 18, 14, 15, 16, 9, 8, 13, 11, 10, 12, 19, 5, 4, 3, 6, 7],
    ("py2s", 1, 0): [18, 15, 16, 14, 19, 17, 8, 9, 10, 12, 13, 11, 0, 2, 1, 7, 3, 6, 4, 5],
    ("py2s", 1, 1): [6, 5, 7, 3, 4, 8, 9, 1, 0, 2, 19, 14, 18, 16, 15, 17, 12, 10, 13, 11],
    ("py2s", 2, 0): [8, 9, 18, 16, 15, 14, 17, 0, 2, 1, 11, 10, 12, 13, 7, 3, 6, 4, 5, 19],
    ("py2s", 2, 1): [2, 0, 1, 18, 16, 14, 17, 15, 8, 9, 4, 7, 5, 6, 3, 19, 12, 10, 13, 11],
    ("py1br", 1, 0): [15, 16, 19, 18, 17, 8, 14, 9, 13, 10, 12, 11, 0, 1, 2, 3, 4, 7, 5, 6],
    ("py1br", 1, 1): [4, 6, 5, 3, 1, 0, 8, 7, 9, 15, 18, 2, 14, 17, 16, 13, 11, 10, 19, 12],
    ("py1br", 2, 0): [15, 9, 14, 8, 16, 17, 18, 0, 1, 2, 3, 10, 5, 11, 7, 4, 6, 12, 13, 19],
    ("py1br", 2, 1): [15, 14, 2, 0, 1, 9, 8, 17, 16, 18, 12, 10, 19, 3, 11, 13, 4, 6, 5, 7],
    ("py1e", 1, 0): [14, 18, 15, 17, 19, 16, 9, 11, 8, 12, 10, 13, 0, 2, 1, 6, 5, 3, 7, 4],
    ("py1e", 1, 1): [3, 4, 6, 5, 7, 9, 8, 1, 2, 0, 19, 17, 14, 15, 18, 16, 12, 11, 10, 13],
    ("py1e", 2, 0): [8, 14, 9, 18, 15, 17, 16, 2, 1, 0, 3, 6, 4, 7, 5, 10, 12, 13, 11, 19],
    ("py1e", 2, 1): [2, 0, 1, 17, 18, 14, 15, 9, 16, 8, 13, 11, 10, 12, 19, 3, 5, 4, 7, 6],
}


@pytest.mark.parametrize("key", list(APPENDIX_A), ids=[f"{a}-C{c}-e{e}" for a, c, e in APPENDIX_A])
def test_appendix_a_golden_vectors(key: tuple[str, int, int]) -> None:
    algo, canonical_nodes, epoch = key
    perm = get_shuffle(algo, [3, 5, 2, 4, 6], canonical_nodes, 7, epoch, 6)
    assert perm.tolist() == APPENDIX_A[key]


def test_py1e_warns_when_block_is_smaller_than_a_unit() -> None:
    with pytest.warns(UserWarning, match="shuffle_block_size=6"):
        get_shuffle("py1e", [3, 5, 2, 4, 6], 1, 7, 0, 6)


def test_naive_seed_plus_epoch_collision_is_kept() -> None:
    # A reference quirk (ordering.md §1.1) that changes the order, so it is reproduced.
    sizes = [10, 20, 30]
    np.testing.assert_array_equal(get_shuffle("naive", sizes, 1, 5, 1), get_shuffle("naive", sizes, 1, 6, 0))
    assert not np.array_equal(get_shuffle("py1s", sizes, 1, 5, 1), get_shuffle("py1s", sizes, 1, 6, 0))


def test_accepts_numpy_sizes_and_integers() -> None:
    sizes = np.array([4, 0, 7, 3], np.int64)
    expected = get_shuffle("py1e", [4, 0, 7, 3], 2, 3, 1, 8)
    # numpy integers where the signature says int: what this test checks is that they are accepted.
    got = get_shuffle("py1e", sizes, np.int64(2), np.int64(3), np.int64(1), np.int64(8))  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("algo", ["naive", "py1s", "py2s"])
def test_block_size_is_ignored_where_unused(algo: str) -> None:
    # Per-stream batching can pass int(S * proportion) == 0; the reference accepts it here.
    np.testing.assert_array_equal(get_shuffle(algo, [3, 4], 2, 1, 0, 0), get_shuffle(algo, [3, 4], 2, 1, 0, 99))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"shard_sizes": [3, -1]}, "shard_sizes\\[1\\]"),
        ({"shard_sizes": [[1, 2]]}, "1-D"),
        ({"shard_sizes": [1.5, 2]}, "integers"),
        ({"num_canonical_nodes": 0}, "num_canonical_nodes"),
        ({"seed": -1}, "shuffle_seed"),
        ({"epoch": -1}, "epoch"),
        ({"seed": 1.0}, "shuffle_seed"),
        # py1b: removed from the reference in 0.11
        ({"algo": "py1b"}, "unknown shuffle_algo 'py1b'; expected one of naive, py1br, py1e, py1s, py2s$"),
        *[({"algo": "py1br", "block_size": size}, "shuffle_block_size") for size in (1, 0, -5)],  # tiny blocks
        *[({"algo": "py1e", "block_size": size}, "shuffle_block_size") for size in (0, -3)],  # an empty block range
        ({"algo": "py1e", "shard_sizes": [2], "num_canonical_nodes": 4, "block_size": 50}, "canonical node"),
        (
            {"algo": "py1e", "shard_sizes": [10, 10], "num_canonical_nodes": 2, "block_size": 8, "starts": [3]},
            "starts has 1 entries for 2 canonical nodes",
        ),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    args = {"algo": "py1s", "shard_sizes": [3, 4], "num_canonical_nodes": 1, "seed": 0, "epoch": 0} | kwargs
    with pytest.raises(ConfigurationError, match=match):
        get_shuffle(**args)


@pytest.mark.parametrize(
    ("algo", "sizes", "canonical_nodes", "block_size"),
    [*[(algo, [0, 0], 2, 4) for algo in ("naive", "py1s", "py2s", "py1br")], ("py1br", [5, 5], 1, 2)],
    ids=["empty-naive", "empty-py1s", "empty-py2s", "empty-py1br", "py1br-block-2"],
)
def test_empty_epochs_and_the_smallest_py1br_block(
    algo: str, sizes: list[int], canonical_nodes: int, block_size: int
) -> None:
    perm = get_shuffle(algo, sizes, canonical_nodes, 0, 0, block_size)
    assert sorted(perm.tolist()) == list(range(sum(sizes)))


# Properties

unit_sizes = st.lists(st.integers(0, 60), min_size=1, max_size=24)
seeds = st.integers(0, 2**40)
epochs = st.integers(0, 6)
block_sizes = st.integers(2, 120)
canonical_nodes = st.integers(1, 8)


def _unit_of_id(sizes: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes)


@settings(max_examples=40, deadline=None)
@given(
    algo=st.sampled_from(SHUFFLE_ALGOS), sizes=unit_sizes, c=canonical_nodes, seed=seeds, epoch=epochs, s=block_sizes
)
def test_is_a_permutation(algo: str, sizes: list[int], c: int, seed: int, epoch: int, s: int) -> None:
    n = sum(sizes)
    if algo == "py1e" and n < c:
        with pytest.raises(ConfigurationError):
            get_shuffle(algo, sizes, c, seed, epoch, s)
        return
    perm = get_shuffle(algo, sizes, c, seed, epoch, s)
    assert perm.dtype == np.int64
    assert np.array_equal(np.sort(perm), np.arange(n))
    np.testing.assert_array_equal(perm, get_shuffle(algo, sizes, c, seed, epoch, s))  # deterministic


@settings(max_examples=40, deadline=None)
@given(
    algo=st.sampled_from(CN_ALGOS),
    sizes=unit_sizes,
    c=canonical_nodes,
    seed=seeds,
    s=block_sizes,
    epochs=st.lists(epochs, min_size=2, max_size=3, unique=True),
)
def test_canonical_node_locality(algo: str, sizes: list[int], c: int, seed: int, s: int, epochs: list[int]) -> None:
    """CN c's positions hold the same ids in every epoch, and only units assigned to c (ordering.md §10.6)."""
    n = sum(sizes)
    if algo == "py1e" and n < c:
        return
    bounds = [n * k // c for k in range(c + 1)]
    unit_of = _unit_of_id(sizes)
    contents = []
    for epoch in epochs:
        perm = get_shuffle(algo, sizes, c, seed, epoch, s)
        contents.append([np.sort(perm[bounds[k] : bounds[k + 1]]) for k in range(c)])
    for other in contents[1:]:
        for first, this in zip(contents[0], other):
            np.testing.assert_array_equal(first, this)
    # Units are cut only at CN boundaries, so at most C-1 units are shared between CNs.
    cns_per_unit: list[set[int]] = [set() for _ in sizes]
    for k, ids in enumerate(contents[0]):
        for unit in np.unique(unit_of[ids]).tolist():
            cns_per_unit[unit].add(k)
    assert sum(len(cns) - 1 for cns in cns_per_unit if cns) <= c - 1
    # A unit's CNs are consecutive, skipping empty CNs (N < C).
    rank = {k: i for i, k in enumerate(k for k, ids in enumerate(contents[0]) if ids.size)}
    for cns in cns_per_unit:
        if cns:
            ranks = sorted(rank[k] for k in cns)
            assert ranks == list(range(ranks[0], ranks[-1] + 1))


@settings(max_examples=25, deadline=None)
@given(sizes=unit_sizes, c=canonical_nodes, seed=seeds, epoch=epochs)
def test_py1s_keeps_each_unit_piece_contiguous(sizes: list[int], c: int, seed: int, epoch: int) -> None:
    n = sum(sizes)
    perm = get_shuffle("py1s", sizes, c, seed, epoch)
    units = _unit_of_id(sizes)[perm]
    bounds = [n * k // c for k in range(c + 1)]
    for k in range(c):
        piece = units[bounds[k] : bounds[k + 1]]
        unit_of_each_run = piece[np.diff(piece, prepend=-1) != 0]
        assert len(unit_of_each_run) == len(np.unique(unit_of_each_run))  # each unit appears as one run within a CN


def test_epochs_differ() -> None:
    sizes = [50] * 20
    for algo in SHUFFLE_ALGOS:
        assert not np.array_equal(get_shuffle(algo, sizes, 2, 1, 0, 40), get_shuffle(algo, sizes, 2, 1, 1, 40)), algo


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 3 * (1 << 16)), min_size=1, max_size=6),
    seed=st.integers(0, 2**32),
    workers=st.sampled_from([1, 2, 3]),
)
def test_unit_shuffler_equals_shuffling_one_slice_after_another(lengths: list[int], seed: int, workers: int) -> None:
    sizes = np.array(lengths, np.int64)
    want, got = np.arange(int(sizes.sum())), np.arange(int(sizes.sum()))
    serial, parallel = np.random.default_rng(seed), np.random.default_rng(seed)
    shuffle_slices(want, sizes, serial)
    with UnitShuffler(workers) as shuffler:
        shuffle_slices(got, sizes, parallel, shuffler)
        shuffler.wait()
        assert np.array_equal(got, want)
    # The generator continues exactly where the serial one does, 32-bit buffer included.
    assert parallel.bit_generator.state == serial.bit_generator.state
    assert parallel.integers(0, 1 << 40, 3).tolist() == serial.integers(0, 1 << 40, 3).tolist()
