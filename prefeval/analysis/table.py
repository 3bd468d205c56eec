"""The runs x measures table papers print (as ranx's ``Report`` and PyTerrier's
``pt.Experiment`` print it), in a tidy layout: one row per run and measure.

Rows follow the table's rows: the runs in the MC4 order of one measure (a baseline's:
its mean), ties by name, or in the order given.  A preference measure's value is the
run's MC4 score (:func:`prefeval.analysis.orderings.order`, as ``prefeval order``) or,
with a reference run, the run's mean preference Δ(run, reference) over the queries
(:func:`prefeval.analysis.significance.pair_summary` of the pairs with it, as ``prefeval
pairs --against``; 0 for the reference itself, Δ(a, a) = 0); a baseline's value is its
mean over the queries (as ``prefeval order`` and ``prefeval metrics``).  The best value
of each measure (rank 1; a baseline where lower is better, its lowest) is marked.

Significance comes from :func:`prefeval.analysis.significance.pair_tests` with one test
and correction: without a reference, every pair of runs of one measure is a family (as
``prefeval discpower`` corrects), each run has a letter (a, b, ..., z, aa, ab, ...) in row
order and a cell carries the letters of the runs it is significantly better than on that
measure; with a reference, the family is the pairs of one measure with the reference (as
``prefeval discpower --against``) and a cell is marked ``+`` (significantly better than
the reference) or ``-`` (worse).  "Better" is the sign of the pair's mean difference (a
metric's reversed where lower is better); a significant pair whose mean ties with 0
marks neither run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import ties
from ..core.cube import against_pairs
from ..measures import parse_measures
from ..options import OptionError
from .baselines import metrics_summary, parse_baselines
from .orderings import Evidence
from .orderings import order as order_table

#: ``order_by`` for the runs in the order given
GIVEN = "given"
#: the columns of the table: with letters (no reference), and against a reference
LETTER_COLUMNS = [
    "row", "run", "letter", "measure", "kind", "method", "value", "rank", "best", "marks",
    "test", "correction", "alpha",
]  # fmt: skip
AGAINST_COLUMNS = [
    "row", "run", "measure", "kind", "method", "value", "rank", "best", "marks", "test",
    "correction", "alpha", "reference", "p_value", "p_adjusted",
]  # fmt: skip
#: the marks of a cell significantly better or worse than the reference's
BETTER, WORSE = "+", "-"


def letter(index: int) -> str:
    """The letter of the run in row ``index`` (from 0): a .. z, then aa, ab, .. az, ba ..
    zz, aaa .. (bijective base 26, as spreadsheet columns), so any number of runs has
    letters."""
    if index < 0:
        raise ValueError(f"letter: {index} is not a row")
    text = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        text = chr(ord("a") + rest) + text
    return text


def joined(letters: list[str], runs: int) -> str:
    """The letters of one cell: run together (``abd``) when every run has one letter,
    separated by commas past 26 runs (``ab,z,aa``: ``aba`` could be read two ways)."""
    return ("," if runs > 26 else "").join(letters)


def row_order(evidence: Evidence, orders: pd.DataFrame, order_by: str) -> list[str]:
    """The runs as the table's rows: :data:`GIVEN`, the evidence's order; a measure's
    name (:func:`canonical_measure`), its ordering (rank, then name) in ``orders``
    (:func:`order_table`)."""
    if order_by == GIVEN:
        return list(evidence.runs)
    order_by = canonical_measure(order_by, evidence.measures)
    mine = orders[orders["measure"] == order_by]
    key = dict(zip(mine["run"], zip(mine["rank"], mine["run"])))
    return sorted(mine["run"], key=key.__getitem__)


def known_measures(name: str) -> list:
    """The measures ``name`` names (preference measures, or else baselines: ``map`` is
    ``AP``), each with its canonical ``name``; empty when it names none."""
    try:
        return parse_measures([name], True)
    except ValueError:
        pass
    try:
        return parse_baselines(name)
    except ValueError:
        return []


def canonical_measure(name: str, measures: list[str]) -> str:
    """``name`` as ``measures`` (a table's) name its measure (``map`` -> ``AP``), or
    :data:`GIVEN`; :class:`~prefeval.options.OptionError` (a ValueError) about
    ``order_by`` when it is none of them."""
    if name == GIVEN or name in measures:
        return name
    for known in known_measures(name):
        if known.name in measures:
            return known.name
    raise OptionError(
        "order_by",
        f"{{value}} is not a measure of the table; give one of {', '.join(measures)}, or "
        f"{GIVEN!r} (the runs in the order given)",
        name,
    )


def _better(means: pd.DataFrame) -> dict:
    """(measure, run_a, run_b) -> +1 when run_a is better by the pair's mean difference, -1
    when run_b is, 0 when it ties with 0 (NaN: no queries)."""
    sign = ties.sign(means["mean"].to_numpy(dtype=np.float64))
    keys = zip(means["measure"], means["run_a"], means["run_b"])
    return {key: s for key, s in zip(keys, sign)}


def baseline_means(evidence: Evidence, name: str) -> dict[str, float]:
    """run -> the baseline ``name``'s summary over the evidence's queries, as ``prefeval
    metrics`` writes its summary rows (:func:`~prefeval.analysis.baselines.metrics_summary`:
    the mean, a count measure's sum, ``gm_map``'s geometric mean; the mean for a name it
    does not know), the same bits where those queries are the ones it summarises."""
    values = np.asarray(evidence.metrics[name], dtype=np.float64)  # queries x runs
    n_q, n_runs = values.shape
    rows = pd.DataFrame(
        {
            "measure": name,
            "run": np.repeat(np.asarray(evidence.runs, dtype=object), n_q),
            "query_id": np.tile(np.asarray(evidence.query_ids, dtype=object), n_runs),
            "value": values.T.reshape(-1),
        }
    )
    try:
        summary = metrics_summary(rows)
    except ValueError:  # a name ir-measures does not know (a --metrics table's): the mean
        return dict(zip(evidence.runs, values.mean(axis=0).tolist()))
    return dict(zip(summary["run"], summary["value"].astype(float)))


def runs_table(
    evidence: Evidence,
    tested: pd.DataFrame,
    means: pd.DataFrame,
    *,
    order_by: str | None = None,
    reference: str | None = None,
    alpha: float = 0.05,
    orders: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The table of ``evidence`` (every pair of runs), one row per run and measure, in
    row order then the measures' order (see the module docstring).

    ``tested``: the rows of :func:`~prefeval.analysis.significance.pair_tests` of one
    test (``measure, test, correction, run_a, run_b, p_value, p_adjusted``): of every
    pair, or with ``reference`` of the pairs with it (``evidence.against(reference)``);
    ``means``: :func:`~prefeval.analysis.significance.pair_summary` of the same pairs.
    ``order_by``: a measure (default the first preference measure, else the first
    measure) or :data:`GIVEN`; ``orders``: :func:`order_table` of ``evidence`` when the
    caller has it.  Columns :data:`LETTER_COLUMNS`, or with ``reference``
    :data:`AGAINST_COLUMNS`."""
    if orders is None:
        orders = order_table(evidence)
    if order_by is None:
        order_by = (evidence.preference_measures or evidence.measures)[0]
    runs = row_order(evidence, orders, order_by)
    if reference is not None:
        against_pairs(evidence.runs, [reference])  # an unknown name: ValueError
    tests = tested["test"].unique()
    if len(tests) > 1:
        raise ValueError(f"runs_table: one test, not {', '.join(tests)}")
    test = tests[0] if len(tests) else ""
    correction = tested["correction"].iloc[0] if len(tested) else ""
    significant = tested[tested["p_adjusted"] < alpha]
    better = _better(means)
    letters = {run: letter(i) for i, run in enumerate(runs)}
    position = {run: i for i, run in enumerate(runs)}
    frames = []
    for name in evidence.measures:
        preference = evidence.is_preference(name)
        mine = orders[orders["measure"] == name]
        value = dict(zip(mine["run"], mine["score"]))
        rank = dict(zip(mine["run"], mine["rank"]))
        method = mine["method"].iloc[0]
        if not preference:  # summed as prefeval metrics sums its summary rows
            value = baseline_means(evidence, name)
            scores = np.array([value[run] for run in evidence.runs], dtype=np.float64)
            better_high = evidence.higher_is_better.get(name, True)
            rank = dict(zip(evidence.runs, ties.competition_ranks(scores, better_high).tolist()))
        frame = pd.DataFrame({"row": np.arange(1, len(runs) + 1), "run": runs})
        if reference is None:
            beaten: dict[str, list[str]] = {run: [] for run in runs}
            for a, b in significant.loc[
                significant["measure"] == name, ["run_a", "run_b"]
            ].itertuples(index=False):
                s = better.get((name, a, b), np.nan)
                if s > 0:
                    beaten[a].append(b)
                elif s < 0:
                    beaten[b].append(a)
            frame["letter"] = [letters[run] for run in runs]
            at = position.__getitem__
            marks = [
                joined([letters[r] for r in sorted(beaten[run], key=at)], len(runs)) for run in runs
            ]
        else:
            part = tested[tested["measure"] == name]
            p = dict(zip(part["run_a"], part["p_value"]))
            adjusted = dict(zip(part["run_a"], part["p_adjusted"]))
            sign = {run: better.get((name, run, reference), np.nan) for run in runs}
            marks = [
                (BETTER if sign[run] > 0 else WORSE if sign[run] < 0 else "")
                if adjusted.get(run, np.nan) < alpha
                else ""
                for run in runs
            ]
            if preference:  # the mean of Δ(run, reference); Δ(reference, reference) = 0
                mean = means[(means["measure"] == name) & (means["run_b"] == reference)]
                value = {**dict(zip(mean["run_a"], mean["mean"])), reference: 0.0}
                scores = np.array([value[run] for run in evidence.runs], dtype=np.float64)
                ranks = ties.competition_ranks(scores)
                rank = dict(zip(evidence.runs, ranks.tolist()))
                method = "delta"
        frame["measure"] = name
        frame["kind"] = "preference" if preference else "baseline"
        frame["method"] = method
        frame["value"] = np.array([value[run] for run in runs], dtype=np.float64)
        frame["rank"] = np.array([rank[run] for run in runs], dtype=np.int64)
        frame["best"] = frame["rank"] == 1
        frame["marks"] = marks
        frame["test"] = test
        frame["correction"] = correction
        frame["alpha"] = float(alpha)
        if reference is not None:
            frame["reference"] = reference
            frame["p_value"] = np.array([p.get(run, np.nan) for run in runs], dtype=np.float64)
            frame["p_adjusted"] = np.array(
                [adjusted.get(run, np.nan) for run in runs], dtype=np.float64
            )
        frames.append(frame)
    columns = LETTER_COLUMNS if reference is None else AGAINST_COLUMNS
    if not frames:
        return pd.DataFrame(columns=columns)
    table = pd.concat(frames, ignore_index=True)[columns]
    # rows by the table's rows, then the measures in their order
    measure_at = {name: i for i, name in enumerate(evidence.measures)}
    key = table["row"].to_numpy() * (len(measure_at) + 1) + table["measure"].map(measure_at)
    return table.iloc[np.argsort(key.to_numpy(), kind="stable")].reset_index(drop=True)
