"""prefeval.core.moments: the moments of paired differences, merged query block by
query block (PairMoments, BlockMoments), against values worked by hand and numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prefeval.core import ties
from prefeval.core.moments import BlockMoments, PairMoments


def test_one_pair_by_hand():
    """1, -1, 0, undefined, 0.5: four defined values, mean 0.5/4, sample variance
    (0.875² + 1.125² + 0.125² + 0.375²) / 3 = 2.1875 / 3, two wins, one loss, one tie."""
    m = PairMoments.of(np.array([[1.0, -1.0, 0.0, np.nan, 0.5]]))
    assert m.n.tolist() == [4]
    assert m.mean().tolist() == [0.125]
    assert np.isclose(m.variance()[0], 2.1875 / 3, rtol=0, atol=1e-15)
    assert (m.wins.tolist(), m.tied.tolist(), m.losses.tolist()) == ([2], [1], [1])
    assert (m.low.tolist(), m.high.tolist()) == ([-1.0], [1.0])


def test_undefined_everywhere_and_one_value():
    m = PairMoments.of(np.array([[np.nan, np.nan], [0.25, np.nan]]))
    assert m.n.tolist() == [0, 1]
    assert np.isnan(m.mean()[0]) and m.mean()[1] == 0.25
    assert np.isnan(m.variance()).all()  # below two values: no sample variance


def test_a_tie_within_tolerance_is_a_tie():
    """A difference that ties with 0 by the one tie rule counts as a tie, not a win."""
    residue = 1.0 / 3 + 1.0 / 3 + 1.0 / 3 - 1.0
    m = PairMoments.of(np.array([[residue, 1e-13, 0.5]]))
    assert (m.wins.tolist(), m.tied.tolist()) == ([1], [2])


values_lists = st.lists(
    st.one_of(st.floats(-1, 1, allow_nan=False), st.just(float("nan"))), min_size=1, max_size=600
)


@settings(max_examples=60, deadline=None)
@given(values_lists, st.integers(1, 3))
def test_blocks_merged_in_order_give_the_same_bits(values, parts):
    """Moments added whole-block by whole-block (as query partitions and Dask workers add
    them) equal those of all the values at once: sums, means and counts to the bit, M2
    to rounding; the mean is ties.defined_mean's, the variance numpy's."""
    data = np.array([values])
    whole = PairMoments.of(data)
    step = max(1, len(values) // parts // ties.SUM_BLOCK) * ties.SUM_BLOCK
    merged = PairMoments(1)
    for lo in range(0, len(values), step):
        merged.merge(BlockMoments.of(data[:, lo : lo + step]))
    assert merged.mean().tobytes() == whole.mean().tobytes()
    assert merged.n.tolist() == whole.n.tolist() == [int(np.sum(~np.isnan(data)))]
    assert whole.mean().tobytes() == ties.defined_mean(data, axis=1).tobytes()
    defined = data[~np.isnan(data)]
    if len(defined) > 1:
        assert np.isclose(whole.variance()[0], np.var(defined, ddof=1), rtol=1e-9, atol=1e-12)
        assert np.isclose(merged.variance()[0], whole.variance()[0], rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(values_lists, min_size=2, max_size=2), st.lists(st.booleans(), min_size=3, max_size=3)
)
def test_selected_reversed_pairs_are_the_negated_values(rows, reverse):
    """select(rows, reverse) is the moments of the reversed pairs' negated values: the
    same bits (sums, means, extremes), wins and losses swapped."""
    n = min(len(r) for r in rows)
    data = np.array([r[:n] for r in rows])
    picked = np.array([1, 0, 1])
    flip = np.array(reverse)
    chosen = PairMoments.of(data).select(picked, flip)
    expected = PairMoments.of(np.where(flip[:, None], 0.0 - data[picked], data[picked]))
    assert chosen.mean().tobytes() == expected.mean().tobytes()
    assert chosen.wins.tolist() == expected.wins.tolist()
    assert chosen.losses.tolist() == expected.losses.tolist()
    assert chosen.low.tobytes() == expected.low.tobytes()
    assert chosen.high.tobytes() == expected.high.tobytes()
