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

METHODS = ("mc4", "borda", "winrate", "copeland")
DEFAULT_METHOD = "mc4"
DEFAULT_TELEPORT = 0.05


@dataclass
class Evidence:
    """Everything the analysis commands look at, aligned on runs and queries.

    ``cube``: preferences (measures x pairs x queries, see PreferenceCube), or None.
    ``metrics``: baseline name -> (queries x runs) matrix of per-query values.
    """

    runs: list[str]
    query_ids: list[str]
    cube: object = None
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)

    @property
    def preference_measures(self) -> list[str]:
        return list(self.cube.measures) if self.cube is not None else []

    @property
    def measures(self) -> list[str]:
        return [*self.preference_measures, *self.metrics]

    def is_preference(self, name: str) -> bool:
        return name in self.preference_measures

    def preferences(self, name: str) -> np.ndarray:
        """(pairs x queries) Delta values of a preference measure (NaN: not evaluated)."""
        return self.cube.values[self.cube.measures.index(name)]

    def pairs(self) -> np.ndarray:
        if self.cube is not None:
            return self.cube.pairs
        ia, ja = np.triu_indices(len(self.runs), 1)
        return np.stack([ia, ja], axis=1)

    def win_rates(self, name: str) -> np.ndarray:
        """(queries x runs) W_q(a) of eq. 7; queries where the measure is undefined dropped."""
        values = self.preferences(name)
        return win_rates(values, self.cube.pairs, len(self.runs))

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
        from .engine import PreferenceCube

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

    Queries where any pair is undefined (NaN) are dropped.
    """
    keep = ~np.isnan(values).any(axis=0)
    v = values[:, keep]
    w = np.zeros((v.shape[1], n_runs))
    np.add.at(w.T, pairs[:, 0], v)
    np.subtract.at(w.T, pairs[:, 1], v)
    return w


def _rank_points(scores: np.ndarray) -> np.ndarray:
    """Per query, runs ranked strictly below plus half the other runs tied (Borda points;
    scipy's average rank minus one)."""
    below = (scores[:, None, :] < scores[:, :, None]).sum(axis=2)
    tied = (scores[:, None, :] == scores[:, :, None]).sum(axis=2) - 1
    return below + 0.5 * tied


def mc4(scores: np.ndarray, teleport: float = DEFAULT_TELEPORT) -> np.ndarray:
    """Stationary distribution of the MC4 chain (Dwork et al. 2001) over per-query rankings.

    b beats a when more queries rank b strictly above a than a above b.  From a the
    chain moves to each run that beats it with probability 1/n and otherwise stays;
    mixed with a uniform teleport of weight ``teleport``.  Solved exactly.
    """
    n = scores.shape[1]
    if n == 1:
        return np.ones(1)
    above = (scores[:, :, None] > scores[:, None, :]).sum(axis=0)  # above[a, b]: a over b
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
    return _rank_points(scores).sum(axis=0)


def copeland(pair_means: np.ndarray, pairs: np.ndarray, n_runs: int) -> np.ndarray:
    """Pairwise wins minus losses of the mean preference over queries."""
    score = np.zeros(n_runs)
    sign = np.sign(pair_means)
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
    if method == "mc4":
        return method, mc4(evidence.scores(name), teleport)
    if method == "borda":
        return method, borda(evidence.scores(name))
    if method == "winrate":
        return method, evidence.scores(name).mean(axis=0)
    if method == "copeland":
        values = evidence.preferences(name)
        with np.errstate(invalid="ignore"):
            means = np.nanmean(values, axis=1)
        return method, copeland(means, evidence.cube.pairs, len(evidence.runs))
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def competition_rank(score: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """1 = best; equal scores (to 12 significant digits) share the smallest rank."""
    rounded = np.array([float(f"{x:.12g}") for x in score])
    key = -rounded if higher_is_better else rounded
    return np.searchsorted(np.sort(key), key, side="left").astype(np.int64) + 1


def order(
    evidence: Evidence,
    measures=None,
    method: str = DEFAULT_METHOD,
    teleport: float = DEFAULT_TELEPORT,
) -> pd.DataFrame:
    """Rows ``measure, method, rank, run, score`` (rank 1 is best) for every measure."""
    rows = []
    for name in measures or evidence.measures:
        used, score = run_scores(evidence, name, method, teleport)
        better = evidence.higher_is_better.get(name, True) if used == "mean" else True
        rank = competition_rank(score, better)
        for i in np.argsort(rank, kind="stable"):
            rows.append((name, used, int(rank[i]), evidence.runs[i], float(score[i])))
    return pd.DataFrame(rows, columns=["measure", "method", "rank", "run", "score"])


def orderings(
    evidence: Evidence, method: str = DEFAULT_METHOD, teleport: float = DEFAULT_TELEPORT
) -> dict[str, np.ndarray]:
    """measure -> per-run score oriented so that higher is better (for Kendall's tau)."""
    out = {}
    for name in evidence.measures:
        used, score = run_scores(evidence, name, method, teleport)
        if used == "mean" and not evidence.higher_is_better.get(name, True):
            score = -score
        out[name] = score
    return out
