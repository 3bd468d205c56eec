"""The one tie rule of prefeval: every comparison of scores that decides something.

Two scores x and y *tie* when ``|x - y| <= TOLERANCE * max(1, |x|, |y|)``; a value is
*zero* when it ties with 0.  ``TOLERANCE`` (1e-12) lies far above the rounding error of
any score prefeval computes (sums of at most millions of terms of magnitude <= n runs:
below 1e-13 relative) and far below any difference two different exact scores can have
in practice, so the rule decides as exact arithmetic would.  Sorted values are cut into
tie groups where consecutive values do not tie (a chain of values each tying with the
next is one group).

The rule is applied to per-query win rates W_q (MC4 majorities, Borda points), to the
run scores of ``order`` (shared ranks) and therefore ``tau`` and ``robustness``, to the
signs of preferences and metric differences (agreement, sign test, ties, Copeland),
to the HSD range comparison, and to the preference values themselves (a weighted RPP
value that ties with 0 is written as 0.0).  Sums that feed these comparisons are also
computed independently of the order of the runs (sorted before summing), so listing
the runs in another order gives the same result.
"""

from __future__ import annotations

import numpy as np

TOLERANCE = 1e-12


def tie(x, y) -> np.ndarray:
    """Whether x and y tie, elementwise (broadcasting)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    scale = np.maximum(1.0, np.maximum(np.abs(x), np.abs(y)))
    return np.abs(x - y) <= TOLERANCE * scale


def is_zero(values) -> np.ndarray:
    """Whether each value ties with 0."""
    return np.abs(np.asarray(values, dtype=np.float64)) <= TOLERANCE


def sign(values) -> np.ndarray:
    """-1, 0 or +1 per value, 0 where the value ties with 0 (NaN stays NaN)."""
    values = np.asarray(values, dtype=np.float64)
    out = np.sign(values)
    out[is_zero(values)] = 0.0
    return out


def snap_zero(values: np.ndarray) -> np.ndarray:
    """``values`` with every value that ties with 0 replaced by exactly 0.0."""
    values = np.array(values, dtype=np.float64, copy=True)
    values[is_zero(values)] = 0.0
    return values


def ordered_sum(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sum along ``axis`` independent of the order of the terms (they are sorted first):
    a permutation of the terms, e.g. of the runs on the command line, gives the same
    float.  NaN terms propagate."""
    return np.sort(np.asarray(values, dtype=np.float64), axis=axis).sum(axis=axis)


def groups(scores: np.ndarray) -> np.ndarray:
    """Tie group of every score along the last axis: an integer that is larger for a
    larger score and equal for scores that tie (0 for the smallest group)."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(scores, axis=-1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=-1)
    if ranked.shape[-1] == 0:
        return np.zeros(scores.shape, dtype=np.int64)
    new_group = ~tie(ranked[..., 1:], ranked[..., :-1])
    sorted_groups = np.concatenate(
        [np.zeros((*ranked.shape[:-1], 1), dtype=np.int64), np.cumsum(new_group, axis=-1)],
        axis=-1,
    )
    out = np.empty(scores.shape, dtype=np.int64)
    np.put_along_axis(out, order, sorted_groups, axis=-1)
    return out


def group_means(scores: np.ndarray) -> np.ndarray:
    """Each score replaced by the mean of its tie group (a 1-D array): scores a linear
    solve gives to runs that tie exactly (copies of one run) come out bit-identical."""
    scores = np.asarray(scores, dtype=np.float64)
    g = groups(scores)
    sums = np.zeros(int(g.max()) + 1 if g.size else 0)
    np.add.at(sums, g, scores)
    counts = np.bincount(g, minlength=len(sums))
    return (sums / np.maximum(counts, 1))[g]


#: entries summed at once (numpy's pairwise sum) by :func:`defined_sum`, whose block sums
#: are then added one after the other: a sum over queries is the same bits whether the
#: queries were held at once or streamed in partitions of whole blocks
SUM_BLOCK = 256


def block_sums(values, axis: int = -1, block: int | None = None) -> np.ndarray:
    """Sums of the defined (non-NaN) entries along ``axis``, one per block of ``block``
    (default :data:`SUM_BLOCK`) entries: shape (blocks, the other axes)."""
    values = np.moveaxis(np.asarray(values, dtype=np.float64), axis, -1)
    block = block or SUM_BLOCK
    starts = range(0, values.shape[-1], block)
    if not starts:
        return np.zeros((0, *values.shape[:-1]))
    return np.stack([np.nansum(values[..., lo : lo + block], axis=-1) for lo in starts])


def running_sum(sums: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """``start`` (zeros when None) plus each of the block ``sums`` in turn: the order in
    which every sum over queries is taken, so partial sums merge to the same bits."""
    total = np.zeros(sums.shape[1:]) if start is None else start
    for part in sums:
        total = total + part
    return total


def defined_sum(values, axis: int = -1, start: np.ndarray | None = None) -> np.ndarray:
    """Sum of the defined (non-NaN) entries along ``axis``, block by block
    (:func:`block_sums`, :func:`running_sum`), added to ``start`` (the running sum of
    earlier blocks)."""
    return running_sum(block_sums(values, axis), start)


def defined_mean(values, axis: int = -1) -> np.ndarray:
    """Mean over the defined (non-NaN) entries along ``axis`` (summed by
    :func:`defined_sum`); NaN where there are none (a measure undefined on every query:
    numpy's "Mean of empty slice" case)."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.sum(~np.isnan(values), axis=axis)
    sums = defined_sum(values, axis=axis)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def competition_ranks(scores: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """Rank 1 = best along the last axis; scores that tie share the best rank of their
    group (1, 2, 2, 4)."""
    g = groups(scores)
    if not higher_is_better:
        g = g.max(axis=-1, keepdims=True) - g if g.size else g
    # rank = 1 + number of scores in better groups
    better = (g[..., None, :] > g[..., :, None]).sum(axis=-1)
    return better.astype(np.int64) + 1


def rank_points(scores: np.ndarray) -> np.ndarray:
    """Borda points along the last axis: scores in lower groups plus half the other
    scores of the same group (scipy's average rank minus one)."""
    g = groups(scores)
    below = (g[..., None, :] < g[..., :, None]).sum(axis=-1)
    tied = (g[..., None, :] == g[..., :, None]).sum(axis=-1) - 1
    return below + 0.5 * tied
