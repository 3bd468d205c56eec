"""Tests and intervals of paired per-query differences, one row of differences at a time.

A row is one comparison of two runs on one measure: its per-query differences d_q
(Delta(a, b) for a preference; value(a) - value(b) for a metric, b - a when lower is
better), NaN where undefined and left out.  The functions take a (rows x queries) matrix
and give one number per row; each row's result depends only on its own defined values
(and the seed), never on the other rows or their order.

- :func:`ttest_pvalues`: the paired t-test, H0: mean = ``null``, one- or two-sided
  (``scipy.stats.ttest_1samp``).
- :func:`sign_pvalues`: the exact sign test on wins against losses, ties dropped
  (``scipy.stats.binomtest``).
- :func:`randomization_pvalues`: the paired randomization (sign-flip) test of the mean:
  under H0 each d_q - null is as likely negated; every one of the 2**n flips where
  2**n <= trials (exact), else ``trials`` random flips, p = (1 + count) / (1 + trials).
- :func:`bootstrap_intervals`: the percentile bootstrap interval of the mean.
- :func:`effect_sizes`: the standardized mean difference mean / sd (ddof 1).

Every comparison of two floats that decides (a flipped mean against the observed one, a
sign, a zero spread) follows :mod:`prefeval.core.ties`.
"""

from __future__ import annotations

import numpy as np

from ..core import ties

ALTERNATIVES = ("less", "greater", "two-sided")
#: values (trials x queries) drawn at a time by the randomization and the bootstrap: the
#: draws depend on the number of queries only, never on how the work is split
_BLOCK_VALUES = 1 << 20


def _defined_rows(differences):
    """``differences`` as a float64 (rows x queries) matrix and, per distinct pattern of
    defined queries, (the rows with that pattern, its query indices)."""
    values = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    defined = ~np.isnan(values)
    patterns, which = np.unique(defined, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    return values, [(np.flatnonzero(which == k), np.flatnonzero(p)) for k, p in enumerate(patterns)]


def _moments(values: np.ndarray):
    """Per row: n, mean, sample sd (ddof 1; NaN below two) and whether the defined values
    all tie (:func:`prefeval.core.ties.tie`: the largest with the smallest)."""
    defined = ~np.isnan(values)
    n = defined.sum(axis=1)
    mean = ties.defined_mean(values, axis=1)
    centred = np.where(defined, values - mean[:, None], 0.0)
    sd = np.sqrt(np.where(n > 1, (centred**2).sum(axis=1) / np.maximum(n - 1, 1), np.nan))
    high = np.where(defined, values, -np.inf).max(axis=1, initial=-np.inf)
    low = np.where(defined, values, np.inf).min(axis=1, initial=np.inf)
    constant = (n == 0) | ties.tie(np.where(n > 0, high, 0.0), np.where(n > 0, low, 0.0))
    return n, mean, sd, constant


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not one of {', '.join(ALTERNATIVES)}")


def t_pvalues(
    n, mean, sd, constant, alternative: str = "two-sided", null: float = 0.0
) -> np.ndarray:
    """The t-test's p-values from each row's moments (``n``, ``mean``, ``sd``, whether its
    values all tie): t = (mean - null) / (sd / sqrt(n)) with n - 1 degrees of freedom.
    Below two values p = 1; values that all tie have no t: p = 0 when the mean lies on
    the side of ``null`` that H1 names (beyond a tie), else 1."""
    from scipy import stats

    _check_alternative(alternative)
    n = np.asarray(n, dtype=np.int64)
    mean, sd = np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    constant = np.asarray(constant, dtype=bool)
    out = np.ones(len(n))
    small = n < 2
    fixed = constant & ~small
    above = (mean > null) & ~ties.tie(mean, null)
    below = (mean < null) & ~ties.tie(mean, null)
    sided = {"less": below, "greater": above, "two-sided": above | below}[alternative]
    out[fixed] = np.where(sided[fixed], 0.0, 1.0)
    varying = ~constant & ~small
    if varying.any():
        df = n[varying] - 1
        t = (mean[varying] - null) / (sd[varying] / np.sqrt(n[varying]))
        if alternative == "less":
            out[varying] = stats.t.cdf(t, df)
        elif alternative == "greater":
            out[varying] = stats.t.sf(t, df)
        else:
            out[varying] = np.minimum(1.0, 2.0 * stats.t.sf(np.abs(t), df))
    return out


def ttest_pvalues(differences, alternative: str = "two-sided", null: float = 0.0) -> np.ndarray:
    """Per row, the paired t-test of H0: mean difference = ``null`` against
    ``alternative`` (``less``: the mean is below ``null``), as
    ``scipy.stats.ttest_1samp(d, null, alternative=...)`` on the row's defined values
    (:func:`t_pvalues` for the rows whose values all tie or are fewer than two)."""
    n, mean, sd, constant = _moments(np.atleast_2d(np.asarray(differences, dtype=np.float64)))
    return t_pvalues(n, mean, sd, constant, alternative, null)


def sign_test_pvalues(wins, losses, alternative: str = "two-sided") -> np.ndarray:
    """Exact sign test of ``wins`` against ``losses`` (ties dropped), H1 by
    ``alternative`` about the wins (``less``: fewer wins than losses are likely), as
    ``scipy.stats.binomtest(wins, wins + losses, 0.5, alternative=...)``; 1 where
    nothing was won or lost."""
    from scipy import stats

    _check_alternative(alternative)
    wins, losses = np.asarray(wins, dtype=np.int64), np.asarray(losses, dtype=np.int64)
    n = wins + losses
    size = np.maximum(n, 1)
    if alternative == "less":
        p = stats.binom.cdf(wins, size, 0.5)
    elif alternative == "greater":
        p = stats.binom.sf(wins - 1, size, 0.5)
    else:
        p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(wins, losses), size, 0.5))
    return np.where(n > 0, np.minimum(1.0, p), 1.0)


def sign_pvalues(differences, alternative: str = "two-sided") -> np.ndarray:
    """:func:`sign_test_pvalues` of each row's wins (d > 0) and losses (d < 0), signs by
    :func:`prefeval.core.ties.sign`."""
    signs = ties.sign(np.atleast_2d(np.asarray(differences, dtype=np.float64)))
    return sign_test_pvalues((signs > 0).sum(axis=1), (signs < 0).sum(axis=1), alternative)


def _flip_blocks(n: int, trials: int, seed: int | None):
    """The sign flips of :func:`randomization_pvalues` for n values, as (flips x n) blocks
    of +-1.0: all 2**n (exact) when 2**n <= ``trials``, else ``trials`` random ones from
    PCG64 seeded by ``seed``, drawn in blocks whose size depends on n alone."""
    if n == 0:
        return
    if n < 63 and (1 << n) <= trials:
        codes = np.arange(1 << n, dtype=np.int64)
        bits = (codes[:, None] >> np.arange(n, dtype=np.int64)) & 1
        yield 1.0 - 2.0 * bits
        return
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    block = max(1, _BLOCK_VALUES // n)
    for start in range(0, trials, block):
        bits = rng.integers(0, 2, size=(min(block, trials - start), n), dtype=np.int64)
        yield 1.0 - 2.0 * bits


def randomization_pvalues(
    differences,
    alternative: str = "two-sided",
    null: float = 0.0,
    trials: int = 10000,
    seed: int | None = 0,
) -> np.ndarray:
    """Per row, the paired randomization test of H0: the differences d_q - ``null`` are
    symmetric about 0, with the mean as statistic (Fisher's sign-flip test).

    Each flip negates some of the centred values x_q = d_q - null; a flip counts when its
    mean is at or below the observed mean of x (``less``), at or above it
    (``greater``), or at least as far from 0 (``two-sided``), a flip that ties with the
    observed value (:func:`prefeval.core.ties.tie`) included.  With n defined values and
    2**n <= ``trials`` every flip is taken once and p = count / 2**n (exact); otherwise
    ``trials`` random flips (seeded by ``seed``; the same flips for every row with n
    values) give p = (1 + count) / (1 + trials), as the randomized HSD.  No defined
    value: p = 1.
    """
    _check_alternative(alternative)
    values, groups = _defined_rows(differences)
    out = np.ones(values.shape[0])
    for rows, queries in groups:
        n = len(queries)
        if n == 0:
            continue
        centred = (values[np.ix_(rows, queries)] - null).T  # n x rows
        observed = centred.mean(axis=0)
        count = np.zeros(len(rows), dtype=np.int64)
        taken = 0
        for flips in _flip_blocks(n, trials, seed):
            means = flips @ centred / n  # flips x rows
            if alternative == "less":
                hit = (means <= observed) | ties.tie(means, observed)
            elif alternative == "greater":
                hit = (means >= observed) | ties.tie(means, observed)
            else:
                far, seen = np.abs(means), np.abs(observed)
                hit = (far >= seen) | ties.tie(far, seen)
            count += hit.sum(axis=0)
            taken += len(flips)
        exact = n < 63 and (1 << n) <= trials
        out[rows] = count / taken if exact else (1.0 + count) / (1.0 + trials)
    return np.minimum(out, 1.0)


def bootstrap_intervals(
    differences, confidence: float = 0.95, resamples: int = 10000, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the two-sided percentile bootstrap interval of the mean difference at
    ``confidence``: the (1 - c)/2 and (1 + c)/2 quantiles (``numpy.quantile``, linear)
    of the means of ``resamples`` resamples of the row's n defined values, drawn with
    replacement (PCG64 seeded by ``seed``: the same resamples for every row with n
    values; each resample's draws added in the order drawn, so a row's interval is the
    same bits whatever rows it comes with).  NaN below two values; a zero-width interval
    at the mean when the values all tie.  Memory: ``resamples`` means per row."""
    values, groups = _defined_rows(differences)
    low = np.full(values.shape[0], np.nan)
    high = np.full(values.shape[0], np.nan)
    _, mean, _, constant = _moments(values)
    for rows, queries in groups:
        n = len(queries)
        if n < 2:
            continue
        chosen = values[np.ix_(rows, queries)].T  # n x rows
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        block = max(1, _BLOCK_VALUES // n)
        means = np.empty((resamples, len(rows)))
        for start in range(0, resamples, block):
            size = min(block, resamples - start)
            picks = rng.integers(0, n, size=(size, n), dtype=np.int64)
            # each resample's sum adds its draws in order (no matrix product, whose sums
            # would follow the number of rows): a row's bits are its own; the rows a
            # stretch at a time, _BLOCK_VALUES sums at most
            width = max(1, _BLOCK_VALUES // size)
            for lo in range(0, len(rows), width):
                part = np.ascontiguousarray(chosen[:, lo : lo + width])
                sums = np.zeros((size, part.shape[1]))
                for k in range(n):
                    sums += part[picks[:, k]]
                means[start : start + size, lo : lo + width] = sums / n
        tails = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
        low[rows], high[rows] = tails[0], tails[1]
    fixed = constant & ~np.isnan(low)
    low[fixed] = high[fixed] = mean[fixed]
    return low, high


def effect_sizes(differences) -> np.ndarray:
    """Per row, the mean difference over its sample standard deviation (ddof 1): Cohen's
    d of paired differences (d_z).  NaN below two values or when they all tie (no
    spread)."""
    n, mean, sd, constant = _moments(np.atleast_2d(np.asarray(differences, dtype=np.float64)))
    return effect_from(n, mean, sd, constant)


def effect_from(n, mean, sd, constant) -> np.ndarray:
    """:func:`effect_sizes` from each row's moments (as :func:`t_pvalues` takes them)."""
    n, mean, sd = np.asarray(n), np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=float)
    ok = (n > 1) & ~np.asarray(constant, dtype=bool)
    return np.where(ok, ties.snap_zero(mean) / np.where(ok, sd, 1.0), np.nan)
