"""The regression gate: is any candidate run worse than the reference run?

For every gated measure and every candidate, the per-query differences
d_q = candidate vs reference (Delta(candidate, reference) for a preference;
value(candidate) - value(reference) for a metric, the other way round where lower is
better: :meth:`~prefeval.analysis.orderings.Evidence.pair_differences`, as ``pairs
--against`` uses them) are tested one-sided and paired:

- regression, H1: mean d < -margin (``ttest``, ``randomization``) or fewer wins than
  losses (``sign``, ties dropped);
- improvement, H1: mean d > +margin, or more wins than losses.

Each family of p-values (the regression tests, the improvement tests) is corrected over
every (candidate, measure) tested.  A row whose adjusted regression p-value is below
alpha is a ``regression``; else one whose adjusted improvement p-value is is an
``improvement``; else ``no difference``.  A row with fewer evaluated queries (where
its difference is defined) than the minimum is ``inconclusive`` and left out of both
families (its p-value is shown, its adjusted one is empty).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core import ties
from ..options import Options
from . import paired
from .orderings import Evidence
from .significance import adjust, pair_summary

COLUMNS = [
    "measure",
    "candidate",
    "reference",
    "queries",
    "mean",
    "ci_low",
    "ci_high",
    "wins",
    "ties",
    "losses",
    "effect",
    "test",
    "p_value",
    "p_adjusted",
    "verdict",
]

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_DIFFERENCE = "no difference"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_DIFFERENCE, INCONCLUSIVE)


def needs_differences(options: Options) -> bool:
    """Whether the gate needs every per-query difference (the randomization test, the
    bootstrap interval), not only their moments."""
    return "randomization" in options.tests or options.ci == "bootstrap"


def _one_sided(evidence: Evidence, name: str, rows: np.ndarray, summary, options: Options):
    """(regression, improvement) p-values of the pairs ``rows`` of measure ``name``."""
    test, margin = options.tests[0], options.margin
    if test == "sign":
        wins, losses = summary["wins"].to_numpy(), summary["losses"].to_numpy()
        return (
            paired.sign_test_pvalues(wins, losses, "less"),
            paired.sign_test_pvalues(wins, losses, "greater"),
        )
    if test == "ttest":
        moments = evidence.moments(name)
        n, mean = moments.n[rows], moments.mean()[rows]
        sd = np.sqrt(moments.variance()[rows])
        constant = moments.constant()[rows]
        return (
            paired.t_pvalues(n, mean, sd, constant, "less", -margin),
            paired.t_pvalues(n, mean, sd, constant, "greater", margin),
        )
    differences = evidence.pair_differences(name)[rows]
    trials, seed = options.trials, options.seed
    return (
        paired.randomization_pvalues(differences, "less", -margin, trials, seed),
        paired.randomization_pvalues(differences, "greater", margin, trials, seed),
    )


def gate(
    evidence: Evidence,
    reference: str,
    options: Options,
    notify: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The gate's table: rows ``measure, candidate, reference, queries, mean, ci_low,
    ci_high, wins, ties, losses, effect, test, p_value, p_adjusted, verdict`` per gated
    measure (in the evidence's order) and candidate (by name).

    ``evidence`` holds the pairs (candidate, ``reference``) (``against``); the columns
    up to effect are :func:`~prefeval.analysis.significance.pair_summary`'s, its
    interval two-sided at 1 - alpha (``options.ci``: ``t`` or the percentile
    ``bootstrap``);
    ``test``, ``margin``, ``correction``, ``alpha``, ``min_queries``, ``trials``,
    ``seed`` and ``resamples`` from ``options``.  ``notify``: told, in one notice, which
    rows are inconclusive and why."""
    pairs = evidence.pairs()
    where = evidence.runs.index(reference)
    if len(pairs) == 0 or not (pairs[:, 1] == where).all():
        raise ValueError(f"gate: the pairs must all be (candidate, {reference})")
    order = np.argsort(np.asarray([evidence.runs[a] for a in pairs[:, 0]], dtype=object))
    summary = pair_summary(
        evidence, 1.0 - options.alpha, options.ci, options.resamples, options.seed, notify
    )
    frames = []
    for k, name in enumerate(evidence.measures):
        part = summary.iloc[k * len(pairs) : (k + 1) * len(pairs)].iloc[order]
        part = part.reset_index(drop=True)
        worse, better = _one_sided(evidence, name, order, part, options)
        frames.append(
            pd.DataFrame(
                {
                    "measure": name,
                    "candidate": part["run_a"],
                    "reference": part["run_b"],
                    **{c: part[c] for c in ("queries", "mean", "ci_low", "ci_high")},
                    **{c: part[c] for c in ("wins", "ties", "losses", "effect")},
                    "test": options.tests[0],
                    "p_value": worse,
                    "_better": better,
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    tested = table["queries"].to_numpy() >= options.min_queries
    worse = np.where(tested, table["p_value"], np.nan)
    better = np.where(tested, table.pop("_better"), np.nan)
    table["p_adjusted"] = adjust(worse, options.correction)
    better_adjusted = adjust(better, options.correction)
    verdict = np.where(
        ~tested,
        INCONCLUSIVE,
        np.where(
            table["p_adjusted"] < options.alpha,
            REGRESSION,
            np.where(better_adjusted < options.alpha, IMPROVEMENT, NO_DIFFERENCE),
        ),
    )
    table["verdict"] = verdict
    if notify is not None and not tested.all():
        notify(_inconclusive(table[~tested], len(table), options.min_queries))
    if notify is not None:
        floor = _unreachable(table[tested], options)
        if floor is not None:
            notify(floor)
    return table[COLUMNS]


def _unreachable(table: pd.DataFrame, options: Options) -> str | None:
    """Why no verdict of the rows of ``table`` can be significant, if so: a sign test's
    p-value is at least 2**-(wins + losses), a randomization test's 1 / (trials + 1) (or
    1 / 2**n, every flip enumerated); corrected over the m rows tested, each at its
    smallest, none is below alpha.  None for the t-test (no such floor)."""
    test, m = options.tests[0], len(table)
    if m == 0 or test == "ttest":
        return None
    if test == "sign":
        decided = (table["wins"] + table["losses"]).to_numpy()
        smallest = 0.5 ** decided.astype(float)
        why = f"the sign test on at most {decided.max()} decided queries"
    else:
        queries = table["queries"].to_numpy()
        enumerated = (queries < 63) & (2.0 ** np.minimum(queries, 62) <= options.trials)
        smallest = np.where(
            enumerated, 0.5 ** np.minimum(queries, 62).astype(float), 1 / (options.trials + 1)
        )
        if enumerated.all():  # more trials change nothing: too few queries
            why = f"randomization on at most {queries.max()} queries (every flip enumerated)"
        else:
            why = f"randomization with {options.trials} trials"
    best = adjust(smallest, options.correction).min()
    if best < options.alpha:
        return None
    more_trials = test == "randomization" and not enumerated.all()
    tests = f"{m} test{'s' if m > 1 else ''}"
    return (
        f"{test}: no verdict can be significant: the smallest p-value of {why} is "
        f"{smallest.min():.2g}, {best:.2g} after {options.correction} over {tests}, not "
        f"below alpha {options.alpha:g}" + ("; raise the number of trials" if more_trials else "")
    )


def _inconclusive(rows: pd.DataFrame, total: int, minimum: int, shown: int = 3) -> str:
    """The notice of the inconclusive ``rows`` (of ``total``): why, and which."""
    low, high = int(rows["queries"].min()), int(rows["queries"].max())
    counts = f"{low}" if low == high else f"{low} to {high}"
    which = [
        f"{row.measure} {row.candidate} vs {row.reference}"
        for row in rows.head(shown).itertuples(index=False)
    ]
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return (
        f"{len(rows)} of {total} verdicts inconclusive: {counts} evaluated "
        f"{'query' if high == 1 else 'queries'}, fewer than the minimum of {minimum} "
        f"({', '.join(which)}{more})"
    )


@dataclass(frozen=True)
class Verdicts:
    """What a gate's table says: its regressions (rows) and whether any verdict is
    inconclusive."""

    regressions: pd.DataFrame
    inconclusive: bool

    @classmethod
    def of(cls, table: pd.DataFrame) -> Verdicts:
        return cls(
            table[table["verdict"] == REGRESSION],
            bool((table["verdict"] == INCONCLUSIVE).any()),
        )

    def lines(self, digits: int = 4) -> list[str]:
        """One line per regression: measure, candidate, reference, mean, interval and
        adjusted p."""
        return [
            f"regression: {row.measure}: {row.candidate} vs {row.reference}: mean "
            f"{_number(row.mean, digits)} [{_number(row.ci_low, digits)}, "
            f"{_number(row.ci_high, digits)}], p_adjusted {_number(row.p_adjusted, digits, True)}"
            for row in self.regressions.itertuples(index=False)
        ]


def _number(value: float, digits: int, small: bool = False) -> str:
    if value is None or np.isnan(value):
        return "nan"
    if small and 0 < value < 10**-digits:
        return f"{value:.{digits - 1}e}"
    return f"{ties.snap_zero(np.array([value]))[0]:.{digits}f}"
