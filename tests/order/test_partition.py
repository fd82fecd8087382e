"""get_partitions against the reference (fixtures, ordering.md Appendix A) and its promised properties."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mds_core.errors import ConfigurationError
from mds_core.order import PARTITION_ALGOS, get_partitions, traversal_order
from mds_core.order.partition import canonical_rows
from tests.order.golden_cases import check_case, golden, without_trailing_padding

# Tiny epochs warn that they repeat samples; expected in small cases.
pytestmark = pytest.mark.filterwarnings("ignore:(Trying|Attempting) to partition .* repeats many samples:UserWarning")

CASES = golden("partition")["cases"]
ARG_NAMES = tuple(inspect.signature(get_partitions).parameters)  # as the fixture's cases name them


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{i}-" + "-".join(str(case[name]) for name in ARG_NAMES) for i, case in enumerate(CASES)]
)
def test_matches_reference_fixture(case: dict) -> None:
    check_case(case, lambda: get_partitions(*[case[name] for name in ARG_NAMES]), "ids")


# Appendix A


@pytest.mark.parametrize(
    "args, expected",
    [
        (("orig", 10, 1, 1, 1, 1, 1, 0), list(range(10))),
        (("orig", 10, 2, 1, 1, 1, 1, 0), [0, 5, 1, 6, 2, 7, 3, 8, 4, 9]),
        (("orig", 11, 3, 1, 1, 1, 1, 0), [0, 3, 7, 1, 4, 8, 2, 5, 9, 2, 6, 10]),
        (("orig", 10, 2, 2, 2, 2, 2, 0), [0, 2, 1, 3, 5, 7, 6, 8, 4, -1, 3, -1, 9, -1, 8, -1]),
        (("orig", 10, 1, 2, 1, 1, 1, 0), list(range(10))),
        (  # resumed on a node count incompatible with the canonical nodes
            ("relaxed", 24, 2, 3, 2, 1, 2, 0, 2),
            [0, 2, 4, 1, 3, 5, 12, 14, 16, 13, 15, 17, 6, 8, 10, 7, 9, 11, 18, 20, 22, 19, 21, 23],
        ),
    ],
)
def test_appendix_a_global_order(args: tuple, expected: list[int]) -> None:
    assert traversal_order(get_partitions(*args)).tolist() == expected


@pytest.mark.parametrize(
    "args, rows",
    [
        ((10, 2, 2, 2, 2, 2, 0), [[0, 2], [4, -1], [1, 3], [3, -1], [5, 7], [9, -1], [6, 8], [8, -1]]),
        ((10, 2, 2, 2, 2, 2, 4), [[2, 4], [-1, -1], [3, 3], [-1, -1], [7, 9], [-1, -1], [8, 8], [-1, -1]]),
        ((10, 1, 2, 1, 1, 1, 0), [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]),
        ((9, 1, 2, 2, 1, 1, 0), [[0, 4, 8], [2, 6, 6], [1, 5, 7], [3, 7, 7]]),  # pad column, then rank padding
    ],
)
def test_appendix_a_rows_of_each_node_rank_and_worker(args: tuple[int, ...], rows: list[list[int]]) -> None:
    work = get_partitions("orig", *args)
    assert work.shape[:3] == args[2:5]  # (nodes, ranks per node, workers per rank)
    assert work.reshape(len(rows), -1).tolist() == rows


# Errors and edge cases


@pytest.mark.parametrize(
    "args, match",
    [
        (("pypy", 10, 1, 1, 1, 1, 1), "^unknown partition_algo 'pypy'; expected one of orig, relaxed$"),
        (("relaxed", 0, 1, 1, 1, 1, 1), "0 samples"),
        (("relaxed", 10, 0, 1, 1, 1, 1), "num_canonical_nodes"),
        (("relaxed", 10, 1, 0, 1, 1, 1), "num_physical_nodes"),
        (("relaxed", 10, 1, 1, 0, 1, 1), "ranks_per_node"),
        (("relaxed", 10, 1, 1, 1, 0, 1), "workers_per_rank"),
        (("relaxed", 10, 1, 1, 1, 1, 0), "batch_size"),
        (("relaxed", 10, 1, 1, 1, 1, None), "batch_size"),
        (("relaxed", 10, 1, 1, 1, 1, 1, -1), "drop_first"),
        (("relaxed", 10, 1, 1, 1, 1, 1, 0, 0), "initial_physical_nodes"),
        *[((algo, 100, 4, 3, 1, 1, 1), "divisible") for algo in PARTITION_ALGOS],  # canonical vs physical nodes
        (("relaxed", 333, 2, 3, 4, 3, 1, 0, 4), "global batch size of 12"),  # a relaxed resume keeps it
        (("orig", 2, 1, 4, 1, 1, 1), "too few"),  # more physical than canonical nodes; the reference fails in numpy
    ],
)
def test_invalid_arguments_name_the_fault(args: tuple, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        get_partitions(*args)


# The allowance is a full world when N divides evenly.
@pytest.mark.parametrize("num_samples, ranks, limit", [(10, 4, 12), (12, 4, 16)])
def test_drop_first_limit(num_samples: int, ranks: int, limit: int) -> None:
    work = get_partitions("orig", num_samples, 1, 1, ranks, 1, 1, limit)
    assert (work == -1).all()
    with pytest.raises(ConfigurationError, match="further into the dataset"):
        get_partitions("orig", num_samples, 1, 1, ranks, 1, 1, limit + 1)


def test_resume_at_the_end_of_the_epoch_yields_nothing() -> None:
    work = get_partitions("orig", 96, 4, 2, 4, 2, 3, 96)
    assert work.size == 0 or (work == -1).all()


def test_fewer_samples_than_canonical_nodes_warns_and_repeats() -> None:
    with pytest.warns(UserWarning, match="repeats"):
        work = get_partitions("orig", 3, 8, 1, 1, 1, 1)
    assert traversal_order(work).tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


def test_drop_first_rounds_down_to_physical_nodes(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mds_core.order.partition"):
        rounded = get_partitions("orig", 100, 4, 2, 2, 1, 2, 5)
    assert "rounding it down" in caplog.text
    np.testing.assert_array_equal(rounded, get_partitions("orig", 100, 4, 2, 2, 1, 2, 4))


# Properties


def _compatible(c: int, p: int) -> bool:
    return c % p == 0 if c >= p else p % c == 0


def _steps(work: np.ndarray, global_batch: int) -> np.ndarray:
    return without_trailing_padding(traversal_order(work).reshape(-1, global_batch))


@st.composite
def worlds(draw: st.DrawFn, canonical_nodes: int) -> tuple[int, int, int, int]:
    nodes = draw(st.sampled_from([p for p in range(1, 9) if _compatible(canonical_nodes, p)]))
    return nodes, draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 6))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), c=st.integers(1, 8), n_extra=st.integers(1, 400), k=st.integers(0, 4))
def test_elastic_invariant(data: st.DataObject, c: int, n_extra: int, k: int) -> None:
    """Global batch t has the same multiset for every (P, R, W, B) with the same G, tail aside (§5.2)."""
    p, r, _, b = data.draw(worlds(c))
    g = p * r * b
    n = c + n_extra
    drop = min(k * g, n // g * g)  # a resume lands on a global batch boundary
    full_columns = c * -(-n // c)  # the grid before P-dependent pad columns and rank padding
    comparable = (full_columns - drop) // g
    reference = _steps(get_partitions("orig", n, c, 1, 1, 1, g, drop), g)[:comparable]
    for p2 in [q for q in range(1, 9) if _compatible(c, q) and g % q == 0]:
        for r2 in [q for q in range(1, 5) if (g // p2) % q == 0]:
            b2 = g // (p2 * r2)
            w2 = data.draw(st.integers(1, 3))
            try:
                work = get_partitions("orig", n, c, p2, r2, w2, b2, drop)
            except ConfigurationError:  # too few samples for P > C
                assert p2 > c
                continue
            steps = _steps(work, g)[:comparable]
            np.testing.assert_array_equal(np.sort(steps, axis=1), np.sort(reference, axis=1))


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 6), data=st.data(), k=st.integers(1, 3))
def test_exactly_once_when_everything_divides(c: int, data: st.DataObject, k: int) -> None:
    p, r, w, b = data.draw(worlds(c))
    n = c * p * r * w * b * k
    for algo in PARTITION_ALGOS:
        work = get_partitions(algo, n, c, p, r, w, b)
        assert work.shape[:3] == (p, r, w) and work.shape[4] == b
        np.testing.assert_array_equal(np.sort(work.ravel()), np.arange(n))


@settings(max_examples=50, deadline=None)
@given(data=st.data(), c=st.integers(1, 8), n=st.integers(1, 400), relaxed=st.booleans())
def test_resume_is_a_suffix_of_the_uninterrupted_epoch(data: st.DataObject, c: int, n: int, relaxed: bool) -> None:
    """drop_first = (batches seen) * G continues exactly where the uninterrupted epoch was, up to the last step:
    its rank-padding repeats come from the (shorter) rows left after the drop, so they may repeat other seen
    samples; that step's new samples are the same."""
    p, r, w, b = data.draw(worlds(c))
    initial = None
    if relaxed:
        # Resume onto any node count whose global batch the initial world can reproduce.
        initial = p
        p = data.draw(st.integers(1, 8))
        b = data.draw(st.sampled_from([q for q in range(1, 25) if (p * q) % initial == 0]))
    g = p * r * b
    algo = "relaxed" if relaxed else "orig"
    try:
        full = _steps(get_partitions(algo, n, c, p, r, w, b, 0, initial), g)
    except ConfigurationError:
        return  # a configuration the reference refuses (tiny N with P > C)
    seen = data.draw(st.integers(0, len(full)))
    world = p * r
    if seen * g > n + world - n % world:  # only tiny epochs have that many repeats
        with pytest.raises(ConfigurationError, match="further into the dataset"):
            get_partitions(algo, n, c, p, r, w, b, seen * g, initial)
        return
    resumed = _steps(get_partitions(algo, n, c, p, r, w, b, seen * g, initial), g)
    expected = full[seen:]
    assert len(resumed) == len(expected)
    if not len(expected):
        return
    np.testing.assert_array_equal(resumed[:-1], expected[:-1])
    earlier = set(full[:-1].ravel().tolist())
    assert set(resumed[-1].tolist()) - earlier == set(expected[-1].tolist()) - earlier


@settings(max_examples=30, deadline=None)
@given(data=st.data(), c=st.integers(1, 8), n=st.integers(1, 400))
def test_relaxed_reproduces_the_initial_traversal(data: st.DataObject, c: int, n: int) -> None:
    p0, r, w, b0 = data.draw(worlds(c))
    g = p0 * r * b0
    p = data.draw(st.sampled_from([q for q in range(1, 13) if g % (q * r) == 0]))
    try:
        initial = _steps(get_partitions("orig", n, c, p0, r, w, b0), g)
    except ConfigurationError:
        return
    try:
        resumed = _steps(get_partitions("relaxed", n, c, p, r, w, g // (p * r), 0, p0), g)
    except ConfigurationError:
        assert _compatible(c, p) and p > c  # orig on the new world, too few samples
        return
    if _compatible(c, p):  # orig on the new world: same batch multisets, different placement
        comparable = c * -(-n // c) // g
        np.testing.assert_array_equal(np.sort(resumed[:comparable], axis=1), np.sort(initial[:comparable], axis=1))
    else:
        np.testing.assert_array_equal(resumed, initial)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), c=st.integers(1, 8), p=st.sampled_from([1, 2, 4, 8]), first=st.integers(0, 500))
def test_canonical_rows_from_a_column_are_the_tail_of_all_rows(n: int, c: int, p: int, first: int) -> None:
    if c % p and p % c:
        return
    try:
        whole = canonical_rows(n, c, p)
    except ConfigurationError:
        return
    assert np.array_equal(canonical_rows(n, c, p, first), whole[:, first:])
