"""PairMoments.select: the moments of some pairs, reversed ones negated, are the bits of
the moments computed from the negated values themselves."""

from __future__ import annotations

import numpy as np

from prefeval.core import ties
from prefeval.core.moments import PairMoments


def test_selected_reversed_moments_are_those_of_the_negated_values():
    rng = np.random.default_rng(7)
    values = rng.normal(size=(5, 700))
    values[rng.random(values.shape) < 0.1] = np.nan
    values[3] = 0.25  # a constant pair: its extremes tie
    values[4, :] = np.nan  # a pair never defined
    rows, reverse = np.array([4, 0, 2, 3, 0]), np.array([True, False, True, True, True])
    chosen = np.where(reverse[:, None], 0.0 - values[rows], values[rows])
    merged = PairMoments(len(values))
    for lo in range(0, values.shape[1], ties.SUM_BLOCK):  # by partitions, as streamed
        merged.add(values[:, lo : lo + ties.SUM_BLOCK])
    got, direct = merged.select(rows, reverse), PairMoments.of(chosen)
    for name in ("n", "sums", "block_mean", "m2", "low", "high", "wins", "tied", "losses"):
        assert np.array_equal(getattr(got, name), getattr(direct, name), equal_nan=True), name
    assert np.array_equal(got.mean(), direct.mean(), equal_nan=True)
    assert np.array_equal(got.variance(), direct.variance(), equal_nan=True)
    assert got.constant().tolist() == [True, False, False, True, False]
    assert got.wins[1] == merged.wins[0] and got.wins[4] == merged.losses[0]
