"""Agreement between measures: Kendall's tau of system orderings (rpp-sigir2022
Table 2) and per-comparison sign agreement and ties (rpp-sigir2022 Fig. 5,
lexirecall Fig. 9, lexiprecision Table 2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core import ties
from .orderings import DEFAULT_METHOD, DEFAULT_TELEPORT, Evidence, orderings

#: runs whose signs of differences are compared with all others at a time by
#: :func:`kendall_tau` (memory: this many x the number of runs bytes, twice)
TAU_BLOCK = 1024


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two orderings given as ranks (higher is better, equal for tied
    runs: :func:`prefeval.analysis.orderings.orderings`), from integer counts over the
    n0 = n(n - 1)/2 pairs of runs: S = concordant - discordant pairs, n1 and n2 the pairs
    tied in ``x`` and in ``y``; tau_b = S / sqrt((n0 - n1)(n0 - n2)), one square root of
    an integer and one division (scipy.stats.kendalltau's value, without its two
    roundings: every pair concordant is exactly 1).  NaN when an ordering is constant,
    below two runs or with a NaN rank."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"kendall_tau: {len(x)} and {len(y)} ranks")
    n = len(x)
    if n < 2 or np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    both = tied_x = tied_y = 0  # over ordered pairs (i, j), i != j: each pair twice
    for lo in range(0, n, TAU_BLOCK):
        sx = np.sign(x[lo : lo + TAU_BLOCK, None] - x[None, :]).astype(np.int8)
        sy = np.sign(y[lo : lo + TAU_BLOCK, None] - y[None, :]).astype(np.int8)
        both += int((sx * sy).sum(dtype=np.int64))
        tied_x += int((sx == 0).sum()) - len(sx)  # the diagonal (i, i) is no pair
        tied_y += int((sy == 0).sum()) - len(sy)
    pairs = n * (n - 1) // 2
    spread = (pairs - tied_x // 2) * (pairs - tied_y // 2)
    if spread == 0:
        return float("nan")
    root = math.isqrt(spread)
    return (both // 2) / (root if root * root == spread else math.sqrt(spread))


def tau_table(
    evidence: Evidence, method: str = DEFAULT_METHOD, teleport: float = DEFAULT_TELEPORT
) -> pd.DataFrame:
    """Rows ``measure_a, measure_b, tau`` for every pair of measures (in listed order).

    Preferences are ordered by ``method`` (MC4 by default), baselines by their mean.
    """
    scores = orderings(evidence, method, teleport)
    names = list(scores)
    rows = [
        (a, b, kendall_tau(scores[a], scores[b]))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    return pd.DataFrame(rows, columns=["measure_a", "measure_b", "tau"])


def tau_matrix_text(table: pd.DataFrame, digits: int = 3) -> str:
    """A readable upper-triangular matrix of the tau table (as in rpp-sigir2022 Table 2),
    values with ``digits`` decimals."""
    names = list(dict.fromkeys([*table["measure_a"], *table["measure_b"]]))
    if not names:
        return ""
    lookup = {(a, b): t for a, b, t in table.itertuples(index=False)}
    width = max(6, *(len(n) for n in names))
    lines = [" " * width + "".join(f" {n:>{width}}" for n in names[1:])]
    for i, a in enumerate(names[:-1]):
        cells = []
        for j, b in enumerate(names[1:], start=1):
            cells.append(f" {lookup[(a, b)]:>{width}.{digits}f}" if j > i else " " * (width + 1))
        lines.append(f"{a:<{width}}" + "".join(cells))
    return "\n".join(lines) + "\n"


#: queries of the signs compared at a time (memory: a few pairs x this many floats)
AGREEMENT_QUERIES = 16 * ties.SUM_BLOCK


def agreement_table(evidence: Evidence) -> pd.DataFrame:
    """Rows ``measure, baseline, agreement, compared``.

    For each preference measure and baseline: among the (query, run pair)
    comparisons where the baseline's values differ, the share where the preference
    has the same sign as the baseline difference (a tied preference disagrees; ties
    and signs by :mod:`prefeval.core.ties`).  Counted a stretch of queries at a time
    (:meth:`~prefeval.analysis.orderings.Evidence.signs_of`: the whole cube, or the
    streamed preferences' packed signs); counts, so the same whatever the stretches.
    """
    names, bases = evidence.preference_measures, list(evidence.metrics)
    agree = np.zeros((len(names), len(bases)), dtype=np.int64)
    compared = np.zeros_like(agree)
    n_q = len(evidence.query_ids)
    for lo in range(0, n_q, AGREEMENT_QUERIES):
        hi = min(n_q, lo + AGREEMENT_QUERIES)
        base_signs = [evidence.signs_of(base, lo, hi) for base in bases]
        for i, name in enumerate(names):
            signs = evidence.signs_of(name, lo, hi)
            for j, diff in enumerate(base_signs):
                ok = ~np.isnan(signs) & ~np.isnan(diff) & (diff != 0)
                compared[i, j] += int(ok.sum())
                agree[i, j] += int((signs[ok] == diff[ok]).sum())
    rows = [
        (name, base, int(agree[i, j]) / int(compared[i, j]) if compared[i, j] else np.nan,
         int(compared[i, j]))
        for i, name in enumerate(names)
        for j, base in enumerate(bases)
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["measure", "baseline", "agreement", "compared"])


def ties_table(evidence: Evidence) -> pd.DataFrame:
    """Rows ``measure, ties, comparisons``: share of (query, run pair) comparisons
    where the measure does not separate the two runs (lexiprecision Table 2), from the
    counts of its :meth:`~prefeval.analysis.orderings.Evidence.moments`."""
    rows = []
    for name in evidence.measures:
        moments = evidence.moments(name)
        comparisons, tied = int(moments.n.sum()), int(moments.tied.sum())
        rows.append((name, tied / comparisons if comparisons else np.nan, comparisons))
    return pd.DataFrame(rows, columns=["measure", "ties", "comparisons"])
