"""prefeval.core.cube: the preference cube, run pairs, win rates and the tallies of
``order``, on values worked by hand and properties against the whole matrix."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from prefeval.core import ties
from prefeval.core.cube import (
    PreferenceCube,
    RankTally,
    SummaryAccumulator,
    against_pairs,
    borda,
    pair_rows,
    pairwise_counts,
    run_pairs,
    win_rates,
)

NAN = float("nan")


def cube(values) -> PreferenceCube:
    """One measure, runs a, b, c (pairs ab, ac, bc), queries q1.. of ``values``."""
    values = np.array(values, dtype=float)[None]
    queries = [f"q{i + 1}" for i in range(values.shape[2])]
    return PreferenceCube(["rpp"], ["a", "b", "c"], queries, run_pairs(3), values)


def test_pairs_by_hand():
    assert run_pairs(3).tolist() == [[0, 1], [0, 2], [1, 2]]
    assert against_pairs(["a", "b", "c"], ["b"]).tolist() == [[0, 1], [2, 1]]
    # two references: every other run against each, the two references' pair once
    assert against_pairs(["a", "b", "c"], ["c", "a"]).tolist() == [[0, 2], [1, 2], [1, 0]]
    with pytest.raises(ValueError, match="--against d: no such run; the runs are a, b, c"):
        against_pairs(["a", "b", "c"], ["d"])
    rows, flipped = pair_rows(run_pairs(3), np.array([[1, 0], [1, 2], [2, 0]]), 3)
    assert rows.tolist() == [0, 2, 1] and flipped.tolist() == [True, False, True]


def test_summary_and_selection_by_hand():
    """The summary is the mean of the defined values; a reversed pair is negated exactly
    (0.0 stays 0.0, not -0.0)."""
    c = cube([[0.5, NAN, -0.25, 0.25], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert c.summary().tolist() == [[0.5 / 3, 0.5, 0.0]]
    reversed_ = c.select_pairs(np.array([[1, 0], [2, 1]]))
    assert reversed_.values[0, 0, [0, 2, 3]].tolist() == [-0.5, 0.25, -0.25]
    assert str(reversed_.values[0, 1, 0]) == "0.0"
    both = c.both_directions()
    assert both.pairs.tolist() == [[0, 1], [1, 0], [0, 2], [2, 0], [1, 2], [2, 1]]
    assert np.array_equal(both.values[0, 1], 0.0 - c.values[0, 0], equal_nan=True)
    with pytest.raises(ValueError):
        cube([[1.0]] * 3).select_pairs(np.array([[0, 0]]))


def test_reindex_and_arrays_round_trip():
    c = cube([[0.5, -0.5], [1.0, 0.0], [0.0, 0.25]])
    wider = c.reindex(["q2", "q9", "q1"])
    assert wider.values[0, :, 0].tolist() == [-0.5, 0.0, 0.25]
    assert np.isnan(wider.values[0, :, 1]).all()
    back = PreferenceCube.from_arrays(c.arrays())
    assert back is not None and back.runs == c.runs and np.array_equal(back.values, c.values)
    broken = c.arrays()
    broken["pairs"] = broken["pairs"][:2]
    assert PreferenceCube.from_arrays(broken) is None


def test_win_rates_by_hand():
    """W_q(a) = sum_b Delta(a, b) (rpp-sigir2022 eq. 7); a query with an undefined pair is
    left out."""
    values = np.array([[0.5, NAN], [1.0, 0.2], [-0.5, 0.1]])  # pairs ab, ac, bc
    assert win_rates(values, run_pairs(3), 3).tolist() == [[1.5, -1.0, -0.5]]


def test_pairwise_counts_and_borda_by_hand():
    """Query 1 ranks a above b = c; query 2 ranks b = c above a."""
    scores = np.array([[3.0, 1.0, 1.0], [0.0, 2.0, 2.0]])
    assert pairwise_counts(scores).tolist() == [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    # Borda: runs below plus half the tied others: (2, 0.5, 0.5) + (0, 1.5, 1.5)
    assert borda(scores).tolist() == [2.0, 2.0, 2.0]


rates = hnp.arrays(
    np.float64,
    st.tuples(st.integers(0, 300), st.integers(2, 5)),
    elements=st.sampled_from([-1.0, -0.5, 0.0, 1 / 3, 0.5, 1.0]),
)


@settings(max_examples=40, deadline=None)
@given(rates, st.integers(1, 4))
def test_rank_tally_in_parts_is_the_whole_matrix(matrix, parts):
    """Win rates added part by part give the counts, points and mean win rates of the
    whole queries x runs matrix, to the bit."""
    tally = RankTally(matrix.shape[1])
    step = max(1, len(matrix) // parts)
    for lo in range(0, len(matrix), step):
        tally.add(matrix[lo : lo + step])
    assert tally.above.tolist() == pairwise_counts(matrix).tolist()
    assert tally.points.tolist() == borda(matrix).tolist()
    if len(matrix):
        assert tally.mean().tobytes() == ties.defined_mean(matrix, axis=0).tobytes()


def test_summary_accumulated_by_partitions_is_the_cube_summary():
    """Partitions of whole sum blocks of queries merge to the whole cube's summary."""
    rng = np.random.default_rng(7)
    n = 3 * ties.SUM_BLOCK + 5
    values = rng.choice([-1.0, -0.5, 0.0, 0.1, 1 / 3, NAN], size=(3, n))
    whole = cube(values)
    total = SummaryAccumulator()
    for lo in range(0, n, 2 * ties.SUM_BLOCK):
        part = cube(values[:, lo : lo + 2 * ties.SUM_BLOCK])
        total.add(part)
    assert total.means().tobytes() == whole.summary().tobytes()
