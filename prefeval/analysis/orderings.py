"""Orderings of systems from per-query preferences (rpp-sigir2022 section 5.4).

Per query, a run's win rate W_q(a) = sum over b != a of Delta(a, b) (eq. 7) ranks
the runs for that query.  Those per-query rankings are aggregated by MC4
(Dwork et al., WWW 2001), Borda count, mean win rate, or Copeland on the mean
preference.  Metrics (baselines) are ordered by their mean over queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core import ties

METHODS = ("mc4", "borda", "winrate", "copeland")
DEFAULT_METHOD = "mc4"
DEFAULT_TELEPORT = 0.05
#: queries ranked at once by MC4 and Borda (their counts are sums over queries)
_ROWS = 1 << 16


@dataclass
class Evidence:
    """Everything the analysis commands look at, aligned on runs and queries.

    ``cube``: preferences (measures x pairs x queries, see PreferenceCube), or None.
    ``metrics``: baseline name -> (queries x runs) matrix of per-query values.
    ``streamed``: instead of a cube (merged from query partitions, see
    :func:`prefeval.pipeline.gather`), per preference measure what kept its win rates
    (:func:`rate_keeper`: the rows, or only their :class:`RankTally`) and its
    :class:`~prefeval.moments.PairMoments` over ``streamed_pairs``: what ``order`` and
    ``discpower`` need, the same bits as from the cube.
    """

    runs: list[str]
    query_ids: list[str]
    cube: object = None
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    streamed: dict = field(default_factory=dict)
    streamed_pairs: np.ndarray | None = None
    _moments: dict = field(default_factory=dict, repr=False)

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
        return win_rates(values, self.cube.pairs, len(self.runs))

    def tally(self, name: str) -> RankTally | None:
        """The :class:`RankTally` kept instead of the win rates of a streamed measure."""
        rates = self.streamed[name][0] if name in self.streamed else None
        return rates if isinstance(rates, RankTally) else None

    def moments(self, name: str):
        """:class:`~prefeval.moments.PairMoments` of :meth:`pair_differences` (computed
        once)."""
        from ..core.moments import PairMoments

        if name in self.streamed:
            return self.streamed[name][1]
        if name not in self._moments:
            self._moments[name] = PairMoments.of(self.pair_differences(name))
        return self._moments[name]

    def scores(self, name: str) -> np.ndarray:
        """(queries x runs) per-query scores, higher is better: W_q for a preference,
        the metric value (negated when lower is better) for a baseline."""
        if self.is_preference(name):
            return self.win_rates(name)
        values = self.metrics[name]
        return values if self.higher_is_better.get(name, True) else -values

    def pair_differences(self, name: str) -> np.ndarray:
        """(pairs x queries) Delta(a, b) for a preference, value(a) - value(b) for a
        metric (sign flipped when lower is better); NaN where undefined."""
        if self.is_preference(name):
            return self.preferences(name)
        scores = self.scores(name)
        pairs = self.pairs()
        return (scores[:, pairs[:, 0]] - scores[:, pairs[:, 1]]).T

    def restrict(self, query_index: np.ndarray) -> Evidence:
        """The same evidence on a subset of queries (by index)."""
        from ..engine.local import PreferenceCube

        cube = None
        if self.cube is not None:
            cube = PreferenceCube(
                self.cube.measures,
                self.cube.runs,
                [self.query_ids[i] for i in query_index],
                self.cube.pairs,
                self.cube.values[:, :, query_index],
            )
        return Evidence(
            self.runs,
            [self.query_ids[i] for i in query_index],
            cube,
            {k: v[query_index] for k, v in self.metrics.items()},
            dict(self.higher_is_better),
        )


def win_rates(values: np.ndarray, pairs: np.ndarray, n_runs: int) -> np.ndarray:
    """W_q(a) = sum_b Delta(a, b) (rpp-sigir2022 eq. 7) from pair values (pairs x queries).

    Queries where any pair is undefined (NaN) are dropped.  Each sum is taken over its
    sorted terms (:func:`prefeval.ties.ordered_sum`), so it does not depend on the order
    of the runs.
    """
    keep = ~np.isnan(values).any(axis=0)
    v = values[:, keep]
    full = np.zeros((v.shape[1], n_runs, n_runs))
    full[:, pairs[:, 0], pairs[:, 1]] = v.T
    full[:, pairs[:, 1], pairs[:, 0]] = -v.T
    return ties.ordered_sum(full, axis=-1)


def mc4(scores: np.ndarray, teleport: float = DEFAULT_TELEPORT) -> np.ndarray:
    """Stationary distribution of the MC4 chain (Dwork et al. 2001) over per-query rankings.

    b beats a when more queries rank b strictly above a than a above b (scores that tie
    under :mod:`prefeval.ties` rank equal).  From a the chain moves to each run that
    beats it with probability 1/n and otherwise stays; mixed with a uniform teleport of
    weight ``teleport``.  Solved as a linear system.
    """
    return mc4_chain(pairwise_counts(scores), teleport)


def pairwise_counts(scores: np.ndarray) -> np.ndarray:
    """above[a, b]: the queries (rows of ``scores``) that rank run a strictly above run b
    (:mod:`prefeval.ties`); counted by chunks of queries, in bounded memory."""
    n = scores.shape[1]
    above = np.zeros((n, n), dtype=np.int64)
    for lo in range(0, len(scores), _ROWS):
        g = ties.groups(scores[lo : lo + _ROWS])
        for a in range(n):
            above[a] += (g[:, a, None] > g).sum(axis=0)
    return above


def mc4_chain(above: np.ndarray, teleport: float = DEFAULT_TELEPORT) -> np.ndarray:
    """:func:`mc4`'s stationary distribution from the :func:`pairwise_counts`."""
    n = above.shape[0]
    if n == 1:
        return np.ones(1)
    beats = above.T > above  # beats[a, b]: b beats a
    move = beats / n
    np.fill_diagonal(move, 0.0)
    move[np.arange(n), np.arange(n)] = 1.0 - move.sum(axis=1)
    chain = (1.0 - teleport) * move + teleport / n
    # pi (chain - I) = 0, sum(pi) = 1
    system = chain.T - np.eye(n)
    system[-1, :] = 1.0
    rhs = np.zeros(n)
    rhs[-1] = 1.0
    return np.linalg.solve(system, rhs)


def borda(scores: np.ndarray) -> np.ndarray:
    """Sum over queries of Borda points (tied runs share, :func:`prefeval.ties.rank_points`;
    halves, so the sum is exact in any order, here by chunks of queries)."""
    total = np.zeros(scores.shape[1])
    for lo in range(0, len(scores), _ROWS):
        total += ties.rank_points(scores[lo : lo + _ROWS]).sum(axis=0)
    return total


class RankTally:
    """What ``order``'s methods need of a measure's win rates, added partition by
    partition (rows of queries, in query order) so that the queries x runs matrix is
    never held: MC4's :func:`pairwise_counts`, the Borda points, and the sums of the
    win rates taken block by block as :func:`prefeval.ties.defined_sum` takes them (the
    rows of an unfinished block carried over).  The same bits as from the matrix."""

    def __init__(self, n_runs: int):
        self.above = np.zeros((n_runs, n_runs), dtype=np.int64)
        self.points = np.zeros(n_runs)
        self._sum = np.zeros(n_runs)
        self._carry = np.zeros((0, n_runs))
        self.rows = 0

    def add(self, rates: np.ndarray) -> None:
        """Count the next queries' win rates (rows x runs)."""
        self.above += pairwise_counts(rates)
        self.points += borda(rates)  # halves: exact in any order
        data = np.concatenate([self._carry, rates])
        whole = len(data) // ties.SUM_BLOCK * ties.SUM_BLOCK
        self._sum = ties.defined_sum(data[:whole], axis=0, start=self._sum)
        self._carry = data[whole:].copy()
        self.rows += len(rates)

    def mean(self) -> np.ndarray:
        """The mean win rate of each run (NaN without queries), as
        :func:`prefeval.ties.defined_mean` of the matrix."""
        total = ties.defined_sum(self._carry, axis=0, start=self._sum.copy())
        return total / self.rows if self.rows else np.full(len(total), np.nan)


def rate_keeper(n_queries: int, n_runs: int, rates: bool, spill: bool = False):
    """What keeps a measure's win rates as the partitions' rows come in (``add``): with
    ``rates`` the rows themselves (:class:`StackedRates`, or :class:`SpilledRates` with
    ``spill``), else only their :class:`RankTally`."""
    if not rates:
        return RankTally(n_runs)
    return SpilledRates(n_runs) if spill else StackedRates(n_queries, n_runs)


class StackedRates:
    """A measure's win rates filled in place, partition by partition, in one
    (at most ``n_queries``) x runs array: stacking the partitions' rows at the end would
    hold them twice."""

    def __init__(self, n_queries: int, n_runs: int):
        self._rates = np.empty((n_queries, n_runs))
        self.rows = 0

    def add(self, rates: np.ndarray) -> None:
        """Append the next queries' win rates (rows x runs)."""
        self._rates[self.rows : self.rows + len(rates)] = rates
        self.rows += len(rates)

    def load(self) -> np.ndarray:
        """Every row added, in order (queries x runs)."""
        return self._rates[: self.rows]


class SpilledRates:
    """A measure's win rates (rows of queries x runs) kept in an anonymous temporary file
    (no name in the file system; gone when closed) while they are gathered, and read
    back whole when asked for: memory holds one measure's at a time, not every
    measure's (0.5 GB at a million users for six measures)."""

    def __init__(self, n_runs: int):
        import tempfile

        self.n_runs = n_runs
        self.rows = 0
        self._file = tempfile.TemporaryFile()

    def add(self, rates: np.ndarray) -> None:
        """Append the next queries' win rates (rows x runs)."""
        self._file.write(np.ascontiguousarray(rates, dtype=np.float64).tobytes())
        self.rows += len(rates)

    def load(self) -> np.ndarray:
        """Every row added, in order (queries x runs)."""
        self._file.seek(0)
        out = np.empty((self.rows, self.n_runs))
        self._file.readinto(memoryview(out).cast("B"))
        return out

    def close(self) -> None:
        self._file.close()


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
    """1 = best; scores that tie (:mod:`prefeval.ties`) share the best rank of their group."""
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
