"""The paired tests and intervals against independent computations: scipy's one-sided
t and binomial tests, exact enumeration of every sign flip, statsmodels' corrections."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from prefeval.analysis import paired
from prefeval.analysis.significance import adjust

ALTERNATIVES = ("less", "greater", "two-sided")


def _rows(seed=2):
    rng = np.random.default_rng(seed)
    values = rng.normal(0.05, 0.3, size=(5, 30))
    values[1, 4:9] = np.nan  # a metric undefined on some queries
    values[2] = np.round(values[2], 1)  # ties with 0 and with each other
    values[3, ::3] = 0.0
    return values


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("null", [0.0, -0.05, 0.1])
def test_ttest_is_scipys_one_sample_test(alternative, null):
    values = _rows()
    got = paired.ttest_pvalues(values, alternative, null)
    for row, p in zip(values, got):
        x = row[~np.isnan(row)]
        assert p == pytest.approx(stats.ttest_1samp(x, null, alternative=alternative).pvalue)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_sign_test_is_scipys_binomial_test(alternative):
    values = _rows()
    got = paired.sign_pvalues(values, alternative)
    for row, p in zip(values, got):
        x = row[~np.isnan(row)]
        wins, losses = int((x > 0).sum()), int((x < 0).sum())
        want = stats.binomtest(wins, wins + losses, 0.5, alternative=alternative).pvalue
        assert p == pytest.approx(want, abs=1e-14)


def test_constant_differences_have_no_t():
    values = np.array([[0.2] * 6, [-0.2] * 6, [0.0] * 6, [0.5] + [np.nan] * 5])
    assert paired.ttest_pvalues(values, "less").tolist() == [1.0, 0.0, 1.0, 1.0]
    assert paired.ttest_pvalues(values, "greater").tolist() == [0.0, 1.0, 1.0, 1.0]
    assert paired.ttest_pvalues(values, "less", null=0.3).tolist() == [0.0, 0.0, 0.0, 1.0]
    assert np.isnan(paired.effect_sizes(values)).tolist() == [True, True, True, True]
    assert paired.effect_sizes([[0.5, 1.0, 1.5]]) == pytest.approx([2.0])


def _enumerated(x, alternative):
    """p of the sign-flip test by listing all 2**n flips (plain Python)."""
    observed, count = sum(x) / len(x), 0
    for flips in itertools.product((1, -1), repeat=len(x)):
        mean = sum(f * v for f, v in zip(flips, x)) / len(x)
        if alternative == "less":
            count += mean <= observed + 1e-12
        elif alternative == "greater":
            count += mean >= observed - 1e-12
        else:
            count += abs(mean) >= abs(observed) - 1e-12
    return count / 2 ** len(x)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("null", [0.0, -0.1])
def test_randomization_enumerates_every_flip_of_a_small_sample(alternative, null):
    rng = np.random.default_rng(5)
    values = rng.normal(0.1, 1.0, size=(4, 11))
    values[1, 3] = np.nan
    values[2] = np.round(values[2])  # integer differences: many flips tie
    got = paired.randomization_pvalues(values, alternative, null, trials=4096)
    for row, p in zip(values, got):
        x = [v - null for v in row if not np.isnan(v)]
        assert p == _enumerated(x, alternative)


def test_randomization_with_trials_approaches_the_t_test_and_is_seeded():
    values = _rows()
    a = paired.randomization_pvalues(values, "less", trials=20000, seed=3)
    b = paired.randomization_pvalues(values[::-1], "less", trials=20000, seed=3)[::-1]
    assert np.array_equal(a, b)  # a row's p-value does not depend on the other rows
    assert not np.array_equal(a, paired.randomization_pvalues(values, "less", 20000, seed=4))
    # (1 + count) / (1 + trials): a multiple of 1/20001
    assert np.allclose((a * 20001) % 1, 0, atol=1e-6) or np.allclose((a * 20001) % 1, 1, atol=1e-6)
    assert np.allclose(a, paired.ttest_pvalues(values, "less"), atol=0.03)


def test_bootstrap_interval_of_the_mean():
    values = _rows()
    low, high = paired.bootstrap_intervals(values, 0.95, 10000, seed=0)
    again = paired.bootstrap_intervals(values[::-1], 0.95, 10000, seed=0)
    assert np.array_equal(low, again[0][::-1]) and np.array_equal(high, again[1][::-1])
    mean = np.nanmean(values, axis=1)
    assert (low < mean).all() and (mean < high).all()
    n = (~np.isnan(values)).sum(axis=1)
    half = stats.t.ppf(0.975, n - 1) * np.nanstd(values, axis=1, ddof=1) / np.sqrt(n)
    assert np.allclose(high - low, 2 * half, rtol=0.15)  # near the t interval
    tied = paired.bootstrap_intervals(np.array([[0.3] * 8, [1.0] + [np.nan] * 7]))
    assert tied[0][0] == tied[1][0] == pytest.approx(0.3) and np.isnan(tied[0][1])


def test_effect_is_mean_over_sample_sd():
    values = _rows()
    want = np.nanmean(values, axis=1) / np.nanstd(values, axis=1, ddof=1)
    assert paired.effect_sizes(values) == pytest.approx(want)


@pytest.mark.parametrize(
    "correction, method",
    [("bonferroni", "bonferroni"), ("holm", "holm"), ("bh", "fdr_bh"), ("by", "fdr_by")],
)
def test_corrections_are_statsmodels(correction, method):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(7)
    for m in (1, 2, 5, 40):
        p = rng.random(m) ** 3
        p[: m // 2] = p[0]  # equal p-values
        want = multitest.multipletests(p, method=method)[1]
        assert adjust(p, correction) == pytest.approx(want, abs=1e-15)
    p = np.array([0.01, np.nan, 0.04, 0.03])  # NaN: not tested, not counted
    want = multitest.multipletests([0.01, 0.04, 0.03], method=method)[1]
    got = adjust(p, correction)
    assert np.isnan(got[1]) and got[[0, 2, 3]] == pytest.approx(want)
