"""Per-pair moments of differences, merged over query partitions.

The pairwise statistics (the t-test, the sign test, the confidence intervals of
``pairs``) need, per run pair, only a few numbers over the queries: the count of
defined differences, their sum, their sum of squared deviations (M2), their extremes
and the signs.  :class:`PairMoments` computes them block by block of
:data:`prefeval.core.ties.SUM_BLOCK` queries and merges the blocks one after the other in
query order (sums as :func:`prefeval.core.ties.defined_sum`; M2 by Chan, Golub and
LeVeque's pairwise update, each block's own M2 taken two-pass about its mean).  Query
partitions are whole blocks, so the moments merged partition by partition are the
same bits as those of all queries at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ties


class PairMoments:
    """Moments of (pairs x queries) differences, NaN = undefined, fed in query order."""

    def __init__(self, n_pairs: int):
        self.n = np.zeros(n_pairs, dtype=np.int64)
        # the sums of the blocks so far, added in order (ties.running_sum)
        self.sums: np.ndarray | None = None
        self.block_mean = np.zeros(n_pairs)  # Chan's running mean (for M2 only)
        self.m2 = np.zeros(n_pairs)
        self.low = np.full(n_pairs, np.inf)
        self.high = np.full(n_pairs, -np.inf)
        self.wins = np.zeros(n_pairs, dtype=np.int64)
        self.tied = np.zeros(n_pairs, dtype=np.int64)
        self.losses = np.zeros(n_pairs, dtype=np.int64)

    @classmethod
    def of(cls, values: np.ndarray) -> PairMoments:
        """The moments of all the (pairs x queries) ``values`` at once."""
        moments = cls(values.shape[0])
        moments.add(values)
        return moments

    def add(self, values: np.ndarray) -> None:
        """Merge the next queries' (pairs x queries) values: whole blocks of
        :data:`~prefeval.core.ties.SUM_BLOCK` queries (but for the last queries)."""
        self.merge(BlockMoments.of(values))

    def merge(self, blocks: BlockMoments) -> None:
        """Merge the next queries' :class:`BlockMoments`, block after block (what
        :meth:`add` does with values: a Dask worker computes the blocks, the client
        merges them in query order, the same bits)."""
        self.sums = ties.running_sum(blocks.sums, self.sums)
        self.wins += blocks.wins
        self.tied += blocks.tied
        self.losses += blocks.losses
        self.low = np.minimum(self.low, blocks.low)
        self.high = np.maximum(self.high, blocks.high)
        for count, mean, m2 in zip(blocks.count, blocks.mean, blocks.m2):
            total = self.n + count
            delta = mean - self.block_mean
            share = np.where(total > 0, count / np.maximum(total, 1), 0.0)
            self.m2 = self.m2 + m2 + delta * delta * self.n * share
            self.block_mean = self.block_mean + delta * share
            self.n = total

    def select(self, rows: np.ndarray, reverse: np.ndarray) -> PairMoments:
        """The moments of the pairs ``rows`` (indices), those where ``reverse`` is true of
        the negated values (the pair reversed, Delta(b, a) = -Delta(a, b)): sums, means and
        extremes negated (``0.0 - x``, exact, as :meth:`PreferenceCube.select_pairs
        <prefeval.core.cube.PreferenceCube.select_pairs>` negates), wins and losses
        swapped, counts and M2 kept: the same bits as the moments of the negated values."""
        rows, reverse = np.asarray(rows, dtype=np.int64), np.asarray(reverse, dtype=bool)

        def signed(values):
            return np.where(reverse, 0.0 - values[rows], values[rows])

        out = PairMoments(len(rows))
        out.n = self.n[rows].copy()
        out.sums = None if self.sums is None else signed(self.sums)
        out.block_mean, out.m2 = signed(self.block_mean), self.m2[rows].copy()
        out.low = np.where(reverse, 0.0 - self.high[rows], self.low[rows])
        out.high = np.where(reverse, 0.0 - self.low[rows], self.high[rows])
        out.wins = np.where(reverse, self.losses[rows], self.wins[rows])
        out.tied = self.tied[rows].copy()
        out.losses = np.where(reverse, self.wins[rows], self.losses[rows])
        return out

    def mean(self) -> np.ndarray:
        """Mean of the defined values (the bits of :func:`prefeval.core.ties.defined_mean`;
        NaN where none; not snapped to 0)."""
        sums = self.sums if self.sums is not None else np.zeros(len(self.n))
        return np.where(self.n > 0, sums / np.maximum(self.n, 1), np.nan)

    def variance(self) -> np.ndarray:
        """Sample variance (n - 1 degrees of freedom); NaN below two values."""
        return np.where(self.n > 1, self.m2 / np.maximum(self.n - 1, 1), np.nan)

    def constant(self) -> np.ndarray:
        """Whether every defined value ties (:mod:`prefeval.core.ties`) with every other: the
        largest ties with the smallest (True where there is no value)."""
        empty = self.n == 0
        return empty | ties.tie(np.where(empty, 0.0, self.high), np.where(empty, 0.0, self.low))


@dataclass
class BlockMoments:
    """The moments of each :data:`~prefeval.core.ties.SUM_BLOCK` of some queries' (pairs x
    queries) values, before merging: per block (blocks x pairs) the sum
    (:func:`prefeval.core.ties.block_sums`), the count of defined values, their mean and M2
    (two-pass about the block's mean); over all the blocks the extremes and the signs."""

    sums: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    low: np.ndarray
    high: np.ndarray
    wins: np.ndarray
    tied: np.ndarray
    losses: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, block: int | None = None) -> BlockMoments:
        """``block``: queries per block (default :data:`~prefeval.core.ties.SUM_BLOCK`)."""
        block = block or ties.SUM_BLOCK
        values = np.asarray(values, dtype=np.float64)
        n_p, n_q = values.shape
        defined = ~np.isnan(values)
        signs = ties.sign(values)
        low = np.full(n_p, np.inf)
        high = np.full(n_p, -np.inf)
        if n_q:
            low = np.where(defined, values, np.inf).min(axis=1)
            high = np.where(defined, values, -np.inf).max(axis=1)
        counts, means, m2s = [], [], []
        for lo in range(0, n_q, block):
            part, ok = values[:, lo : lo + block], defined[:, lo : lo + block]
            count = ok.sum(axis=1)
            zeroed = np.where(ok, part, 0.0)
            mean = zeroed.sum(axis=1) / np.maximum(count, 1)
            counts.append(count)
            means.append(mean)
            m2s.append(np.where(ok, (part - mean[:, None]) ** 2, 0.0).sum(axis=1))
        empty = np.zeros((0, n_p))
        return cls(
            sums=ties.block_sums(values, axis=1, block=block),
            count=np.array(counts, dtype=np.int64).reshape(-1, n_p) if counts else empty,
            mean=np.array(means).reshape(-1, n_p) if means else empty,
            m2=np.array(m2s).reshape(-1, n_p) if m2s else empty,
            low=low,
            high=high,
            wins=np.sum(signs > 0, axis=1),
            tied=np.sum(signs == 0, axis=1),
            losses=np.sum(signs < 0, axis=1),
        )
