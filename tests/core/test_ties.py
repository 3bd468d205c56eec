"""The one tie rule (prefeval/ties.py) and its use where comparisons decide something."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prefeval.analysis.orderings import mc4
from prefeval.core import ties
from prefeval.core.cube import borda, win_rates


def test_values_within_tolerance_tie_and_zero_is_exact():
    third = 1.0 / 3.0
    residue = third + third + third - 1.0  # 0 in exact arithmetic
    assert ties.sign(np.array([residue, 1e-13, -1e-13, 2e-12, -0.5])).tolist() == [
        0.0,
        0.0,
        0.0,
        1.0,
        -1.0,
    ]
    snapped = ties.snap_zero(np.array([5.551115123125783e-17, -1e-17, 0.25]))
    assert snapped.tolist() == [0.0, 0.0, 0.25]
    assert str(snapped[1]) == "0.0"  # not -0.0


def test_groups_and_ranks():
    # 0.1 + 0.2 and 0.3 differ in the last bit: one group
    scores = np.array([0.1 + 0.2, 0.3, 1.0, -2.0, 1.0 + 1e-9])
    assert ties.groups(scores).tolist() == [1, 1, 2, 0, 3]
    assert ties.competition_ranks(scores).tolist() == [3, 3, 2, 5, 1]
    assert ties.competition_ranks(scores, higher_is_better=False).tolist() == [2, 2, 4, 1, 5]
    assert ties.rank_points(scores).tolist() == [1.5, 1.5, 3.0, 0.0, 4.0]
    # large values: the tolerance is relative
    big = np.array([1e6, 1e6 + 1e-7, 1e6 + 1e-5])
    assert ties.groups(big).tolist() == [0, 0, 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=12), st.randoms())
def test_ordered_sum_ignores_the_order_of_the_terms(terms, random):
    shuffled = list(terms)
    random.shuffle(shuffled)
    assert ties.ordered_sum(np.array(terms)) == ties.ordered_sum(np.array(shuffled))


def _pairs(n):
    ia, ja = np.triu_indices(n, 1)
    return np.stack([ia, ja], axis=1)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(3, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.lists(
                    st.sampled_from([-1.0, -0.5, -1 / 3, 0.0, 1 / 3, 0.5, 1.0]),
                    min_size=n,
                    max_size=n,
                ),
                min_size=1,
                max_size=5,
            ),
            st.permutations(range(n)),
        )
    )
)
def test_win_rates_mc4_borda_independent_of_run_order(case):
    """Per-query scores s_q(a) give Delta(a, b) = s_q(a) - s_q(b) style preferences; any
    relabelling of the runs gives the same W_q, Borda points and MC4 probabilities (the
    MC4 solve up to rounding: its ranks are compared)."""
    n, rows, perm = case
    s = np.array(rows)
    pairs = _pairs(n)
    delta = (s[:, pairs[:, 0]] - s[:, pairs[:, 1]]).T / 3.0
    w = win_rates(delta, pairs, n)
    perm = np.array(perm)
    s2 = s[:, perm]
    delta2 = (s2[:, pairs[:, 0]] - s2[:, pairs[:, 1]]).T / 3.0
    w2 = win_rates(delta2, pairs, n)
    assert np.array_equal(w[:, perm], w2)
    assert np.array_equal(borda(w)[perm], borda(w2))
    ranks = ties.competition_ranks(mc4(w))
    assert np.array_equal(ranks[perm], ties.competition_ranks(mc4(w2)))
