"""Orderings of systems from per-query preferences (rpp-sigir2022 section 5.4).

Per query, a run's win rate W_q(a) = sum over b != a of Delta(a, b) (eq. 7) ranks
the runs for that query.  Those per-query rankings are aggregated by MC4
(Dwork et al., WWW 2001), Borda count, mean win rate, or Copeland on the mean
preference.  Metrics (baselines) are ordered by their mean over queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from ..core import ties
from ..core.cube import (
    PreferenceCube,
    RankTally,
    SpilledRates,
    StackedRates,
    against_pairs,
    borda,
    pair_rows,
    pairwise_counts,
    win_rates,
)
from ..core.moments import PairMoments
from ..options import METHODS

#: queries of a metric's pair differences at a time for its moments (whole blocks of
#: :data:`~prefeval.core.ties.SUM_BLOCK`: the same bits as all at once)
MOMENT_QUERIES = 256 * ties.SUM_BLOCK
DEFAULT_METHOD = "mc4"
DEFAULT_TELEPORT = 0.05


@dataclass
class Evidence:
    """Everything the analysis commands look at, aligned on runs and queries.

    ``cube``: preferences (measures x pairs x queries, see PreferenceCube), or None.
    ``metrics``: baseline name -> (queries x runs) matrix of per-query values.
    ``streamed``: instead of a cube (merged from query partitions, see
    :func:`prefeval.analysis.evidence.gather_inputs`), per preference measure what kept
    its win rates (:func:`~prefeval.core.cube.rate_keeper`: the rows, or only their
    :class:`~prefeval.core.cube.RankTally`) and its
    :class:`~prefeval.core.moments.PairMoments` over ``streamed_pairs``: what ``order`` and
    ``discpower`` need, the same bits as from the cube; ``signs``: with ``streamed``, per
    preference measure its :class:`~prefeval.core.cube.PackedSigns` (``agree``).
    """

    runs: list[str]
    query_ids: list[str]
    cube: PreferenceCube | None = None
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    streamed: dict = field(default_factory=dict)
    streamed_pairs: np.ndarray | None = None
    signs: dict = field(default_factory=dict)
    _moments: dict = field(default_factory=dict, repr=False)
    _rows: dict = field(default_factory=dict, repr=False)

    @property
    def preference_measures(self) -> list[str]:
        if self.cube is not None:
            return list(self.cube.measures)
        return list(self.streamed)

    @property
    def measures(self) -> list[str]:
        return [*self.preference_measures, *self.metrics]

    def is_preference(self, name: str) -> bool:
        return name in self.preference_measures

    def preferences(self, name: str) -> np.ndarray:
        """(pairs x queries) Delta values of a preference measure (NaN: not evaluated)."""
        assert self.cube is not None  # a streamed measure's values are not kept
        return self.cube.values[self.cube.measures.index(name)]

    def name_order(self) -> np.ndarray:
        """The run indices sorted by run name: a canonical order of the runs, for the
        computations whose floats or random draws would otherwise follow the order the
        runs were given in (the MC4 solve, the HSD permutations)."""
        return np.argsort(np.asarray(self.runs, dtype=object), kind="stable")

    def pairs(self) -> np.ndarray:
        if self.cube is not None:
            return self.cube.pairs
        if self.streamed_pairs is not None:
            return self.streamed_pairs
        ia, ja = np.triu_indices(len(self.runs), 1)
        return np.stack([ia, ja], axis=1)

    def win_rates(self, name: str) -> np.ndarray:
        """(queries x runs) W_q(a) of eq. 7; queries where the measure is undefined dropped."""
        if name in self.streamed:
            rates = self.streamed[name][0]
            if isinstance(rates, RankTally):
                raise ValueError(f"{name}: only the win rates' tally was kept")
            if isinstance(rates, (StackedRates, SpilledRates)):
                return rates.load()
            return rates
        values = self.preferences(name)
        assert self.cube is not None  # preferences() holds it
        return win_rates(values, self.cube.pairs, len(self.runs))

    def tally(self, name: str) -> RankTally | None:
        """The :class:`RankTally` kept instead of the win rates of a streamed measure."""
        rates = self.streamed[name][0] if name in self.streamed else None
        return rates if isinstance(rates, RankTally) else None

    def moments(self, name: str):
        """:class:`~prefeval.core.moments.PairMoments` of :meth:`pair_differences` (computed
        once)."""

        if name in self.streamed:
            if self.streamed[name][1] is None:
                raise ValueError(f"{name}: no pair moments on these queries (restricted)")
            return self.streamed[name][1]
        if name not in self._moments:
            if self.is_preference(name):
                moments = PairMoments.of(self.pair_differences(name))
            else:
                # a metric's differences a stretch of queries at a time (whole blocks:
                # the same bits), never all pairs x queries at once (1 GB at 1M users)
                moments = PairMoments(len(self.pairs()))
                for lo in range(0, len(self.query_ids), MOMENT_QUERIES):
                    moments.add(self.pair_differences(name, slice(lo, lo + MOMENT_QUERIES)))
            self._moments[name] = moments
        return self._moments[name]

    def scores(self, name: str, queries: slice | None = None) -> np.ndarray:
        """(queries x runs) per-query scores, higher is better: W_q for a preference,
        the metric value (negated when lower is better) for a baseline (``queries``: on
        those queries only)."""
        if self.is_preference(name):
            return self.win_rates(name)
        values = self.metrics[name] if queries is None else self.metrics[name][queries]
        return values if self.higher_is_better.get(name, True) else -values

    def pair_differences(self, name: str, queries: slice | None = None) -> np.ndarray:
        """(pairs x queries) Delta(a, b) for a preference, value(a) - value(b) for a
        metric (sign flipped when lower is better); NaN where undefined.  ``queries``: a
        metric's on those queries only."""
        if self.is_preference(name):
            return self.preferences(name)
        scores = self.scores(name, queries)
        pairs = self.pairs()
        return (scores[:, pairs[:, 0]] - scores[:, pairs[:, 1]]).T

    def signs_of(self, name: str, lo: int, hi: int) -> np.ndarray:
        """(pairs x queries ``lo`` to ``hi``) :func:`prefeval.core.ties.sign` of
        :meth:`pair_differences` (NaN where undefined), from the cube, the packed signs
        of a streamed measure, or a metric's values."""
        if name in self.streamed:
            if name not in self.signs:
                raise ValueError(f"{name}: its preferences' signs were not kept")
            return self.signs[name].signs(lo, hi)
        if self.is_preference(name):
            return ties.sign(self.preferences(name)[:, lo:hi])
        return ties.sign(self.pair_differences(name, slice(lo, hi)))

    def rows_of(self, name: str) -> np.ndarray | None:
        """The :meth:`win_rates` row of each query (-1: none, the measure is undefined on
        some pair there), or None when every query has its row (computed once; a streamed
        measure's from its packed signs)."""
        if name not in self._rows:
            n_q = len(self.query_ids)
            defined = np.empty(n_q, dtype=bool)
            for lo in range(0, n_q, MOMENT_QUERIES):
                hi = min(n_q, lo + MOMENT_QUERIES)
                defined[lo:hi] = ~np.isnan(self.signs_of(name, lo, hi)).any(axis=0)
            self._rows[name] = (
                None if defined.all() else np.where(defined, np.cumsum(defined) - 1, -1)
            )
        return self._rows[name]

    def against(self, reference: str) -> Evidence:
        """The evidence of the pairs (a, ``reference``) for every other run a, in the runs'
        order (:func:`~prefeval.core.cube.against_pairs`), from this evidence of every pair:
        a cube's values selected (a reversed pair's negated, exactly), a streamed measure's
        moments likewise (:meth:`PairMoments.select
        <prefeval.core.moments.PairMoments.select>`; only its moments, not its win rates:
        what the gate's t-test, sign test and t interval need), the metrics as they are."""
        pairs = against_pairs(self.runs, [reference])
        metrics, better = dict(self.metrics), dict(self.higher_is_better)
        if self.cube is not None:
            cube = self.cube.select_pairs(pairs)
            return Evidence(self.runs, self.query_ids, cube, metrics, better)
        rows, reverse = pair_rows(self.pairs(), pairs, len(self.runs))
        if (rows < 0).any():
            raise ValueError(f"against {reference}: a pair this evidence does not hold")
        streamed = {
            name: (None, self.moments(name).select(rows, reverse)) for name in self.streamed
        }
        return Evidence(
            self.runs, self.query_ids, None, metrics, better, streamed=streamed,
            streamed_pairs=pairs,
        )  # fmt: skip

    def restrict(self, query_index: np.ndarray, names=None) -> Evidence:
        """The same evidence on a subset of queries (by index, ascending), of the
        measures ``names`` (None: all).  Of a streamed measure, only its win rates (one
        measure's read at a time; the rows of the chosen queries where it is defined):
        what MC4, Borda and the mean win rate need."""

        queries = [self.query_ids[i] for i in query_index]
        names = self.measures if names is None else list(names)
        metrics = {k: v[query_index] for k, v in self.metrics.items() if k in names}
        if self.streamed:
            streamed = {}
            for name in (n for n in self.streamed if n in names):
                rows = self.rows_of(name)
                chosen = query_index if rows is None else rows[query_index]
                streamed[name] = (self.win_rates(name)[chosen[chosen >= 0]], None)
            return Evidence(
                self.runs, queries, None, metrics, dict(self.higher_is_better),
                streamed=streamed, streamed_pairs=self.streamed_pairs,
            )  # fmt: skip
        cube = None
        if self.cube is not None:
            kept = [m for m in self.cube.measures if m in names]
            at = [self.cube.measures.index(m) for m in kept]
            values = self.cube.values[at][:, :, query_index]
            cube = PreferenceCube(kept, self.cube.runs, queries, self.cube.pairs, values)
        return Evidence(self.runs, queries, cube, metrics, dict(self.higher_is_better))


def mc4(scores: np.ndarray, teleport: float = DEFAULT_TELEPORT) -> np.ndarray:
    """Stationary distribution of the MC4 chain (Dwork et al. 2001) over per-query rankings.

    b beats a when more queries rank b strictly above a than a above b (scores that tie
    under :mod:`prefeval.core.ties` rank equal).  From a the chain moves to each run that
    beats it with probability 1/n and otherwise stays; mixed with a uniform teleport of
    weight ``teleport``.  Each score is the float64 nearest its exact value
    (:func:`mc4_chain`).
    """
    return mc4_chain(pairwise_counts(scores), teleport)


#: refinements of the float solution tried before :func:`_exact_solution` takes over
_REFINEMENTS = 3


def mc4_chain(above: np.ndarray, teleport: float = DEFAULT_TELEPORT) -> np.ndarray:
    """:func:`mc4`'s stationary distribution from the :func:`pairwise_counts`: each
    score the float64 nearest its exact rational value (so the scores of a chain whose
    exact stationary distribution is 4/5, 6/55, ... are written 0.8, 0.10909090909090909,
    ... whatever the order of the runs or the machine's linear algebra).

    With the teleport t = p/q (the decimal it is written as: 0.05 = 1/20), B the 0/1
    matrix B[a, b] = b beats a and L = diag(B 1) - B, the stationary pi (pi P = pi, sum
    1) solves the integer system pi A = p 1 with A = (q - p) L + n p I (multiplying
    pi (I - P) = 0 by n q; the sum 1 follows, as L 1 = 0).  A is strictly diagonally
    dominant by rows with margin d = n p, so for any y the exact residual r = p 1 - y A
    bounds the error: |pi_i - y_i| <= ||r||_1 / d.  A float64 solution is refined with
    exact (integer) residuals until the bound puts each pi_i in the rounding interval of
    one float64 (certified), or solved in fractions where it does not."""
    n = above.shape[0]
    if n == 1:
        return np.ones(1)
    weight = Fraction(repr(float(teleport)))
    p, q = weight.numerator, weight.denominator
    beats = (above.T > above).astype(np.int64)  # beats[a, b]: b beats a
    system = np.empty((n, n), dtype=object)
    system[:, :] = [[-(q - p) * int(v) for v in row] for row in beats]
    for a, lost in enumerate(beats.sum(axis=1).tolist()):
        system[a, a] = (q - p) * lost + n * p
    return _nearest_solution(system, p, n * p)


def _nearest_solution(system: np.ndarray, rhs: int, margin: int) -> np.ndarray:
    """The float64 nearest each entry of the row vector x solving x ``system`` = ``rhs``
    1 (Python integers; strictly diagonally dominant by rows by ``margin``)."""
    from scipy.linalg import lu_factor, lu_solve

    n = system.shape[0]
    factors = lu_factor(system.T.astype(np.float64))
    parts = [lu_solve(factors, np.full(n, float(rhs)))]
    for _ in range(_REFINEMENTS):
        # y = the sum of the parts, exactly: integers over one power of two
        scale = max((Fraction(v).denominator for part in parts for v in part.tolist()), default=1)
        y = np.zeros(n, dtype=object)
        for part in parts:
            y += np.array([int(v * scale) for v in map(Fraction, part.tolist())], dtype=object)
        residual = rhs * scale - y.dot(system)  # (p 1 - y A) * scale, exactly
        bound = Fraction(sum(abs(int(v)) for v in residual), scale * margin)
        values = [Fraction(int(v), scale) for v in y]
        nearest = [float(v) for v in values]
        if all(float(v - bound) == z == float(v + bound) for v, z in zip(values, nearest)):
            return np.array(nearest)
        parts.append(
            lu_solve(factors, np.array([float(Fraction(int(v), scale)) for v in residual]))
        )
    return np.array([float(v) for v in _exact_solution(system, rhs)])


def _exact_solution(system: np.ndarray, rhs: int) -> list[Fraction]:
    """x solving x ``system`` = ``rhs`` 1 in fractions (Gauss-Jordan on the transpose)."""
    n = system.shape[0]
    rows = [[Fraction(int(system[j, i])) for j in range(n)] + [Fraction(rhs)] for i in range(n)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        head = rows[col][col]
        rows[col] = [v / head for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [v - factor * w for v, w in zip(rows[r], rows[col])]
    return [rows[i][n] for i in range(n)]


def copeland(pair_means: np.ndarray, pairs: np.ndarray, n_runs: int) -> np.ndarray:
    """Pairwise wins minus losses of the mean preference over queries (a mean that ties
    with 0 counts for neither)."""
    score = np.zeros(n_runs)
    sign = ties.sign(pair_means)
    np.add.at(score, pairs[:, 0], sign)
    np.subtract.at(score, pairs[:, 1], sign)
    return score


def run_scores(
    evidence: Evidence, name: str, method: str = DEFAULT_METHOD, teleport: float = DEFAULT_TELEPORT
) -> tuple[str, np.ndarray]:
    """(method used, one score per run; higher is better) for one measure."""
    if not evidence.is_preference(name):
        values = evidence.metrics[name]
        mean = values.mean(axis=0)
        return "mean", mean
    tally = evidence.tally(name)
    if method == "mc4":
        # solve in run-name order: the same floats whatever the order of the runs
        canonical = evidence.name_order()
        above = tally.above if tally is not None else pairwise_counts(evidence.scores(name))
        score = np.empty(len(canonical))
        score[canonical] = ties.group_means(
            mc4_chain(above[np.ix_(canonical, canonical)], teleport)
        )
        return method, score
    if method == "borda":
        return method, tally.points.copy() if tally is not None else borda(evidence.scores(name))
    if method == "winrate":  # summed by blocks of queries, as every mean over queries
        if tally is not None:
            return method, tally.mean()
        return method, ties.defined_mean(evidence.scores(name), axis=0)
    if method == "copeland":
        means = evidence.moments(name).mean()
        return method, copeland(means, evidence.pairs(), len(evidence.runs))
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def competition_rank(score: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """1 = best; scores that tie (:mod:`prefeval.core.ties`) share the best rank of their group."""
    return ties.competition_ranks(np.asarray(score, dtype=np.float64), higher_is_better)


def order(
    evidence: Evidence,
    measures=None,
    method: str = DEFAULT_METHOD,
    teleport: float = DEFAULT_TELEPORT,
) -> pd.DataFrame:
    """Rows ``measure, method, rank, run, score`` (rank 1 is best) for every measure;
    runs that share a rank are listed by name, whatever their command-line order."""
    rows = []
    for name in measures or evidence.measures:
        used, score = run_scores(evidence, name, method, teleport)
        better = evidence.higher_is_better.get(name, True) if used == "mean" else True
        rank = competition_rank(score, better)
        for i in sorted(range(len(rank)), key=lambda i: (rank[i], evidence.runs[i])):
            rows.append((name, used, int(rank[i]), evidence.runs[i], float(score[i])))
    return pd.DataFrame(rows, columns=["measure", "method", "rank", "run", "score"])


def orderings(
    evidence: Evidence, method: str = DEFAULT_METHOD, teleport: float = DEFAULT_TELEPORT
) -> dict[str, np.ndarray]:
    """measure -> per-run position in its ordering, higher is better (for Kendall's tau):
    minus ``order``'s rank, so runs that share a rank in ``order`` tie here too."""
    out = {}
    for name in evidence.measures:
        used, score = run_scores(evidence, name, method, teleport)
        better = evidence.higher_is_better.get(name, True) if used == "mean" else True
        out[name] = -competition_rank(score, better).astype(np.float64)
    return out
