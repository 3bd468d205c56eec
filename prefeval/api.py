"""The Python API: one function per command, returning the DataFrame the command writes.

``prefeval.compare(qrels, runs, ...)`` gives exactly the rows of ``prefeval compare``
(same columns, rows and order), and so on for ``metrics``, ``order``, ``discpower``,
``tau``, ``agree`` and ``robustness``; keyword arguments are the commands' options.

Inputs (:mod:`prefeval.inputs`): paths (``str`` or ``pathlib.Path``), DataFrames with
ir-measures (``query_id, doc_id, score``/``relevance[, iteration]``) or PyTerrier
(``qid, docno, score``/``label``) columns, iterables of ``ir_measures.ScoredDoc``/``Qrel``,
``{query_id: {doc_id: value}}`` dicts (pytrec_eval); several runs as a list, a dict
name -> run, or one DataFrame with a ``run`` (or ``name``) column.  The analysis
functions also take ``prefs=`` (a table of ``compare(..., per_query=True)``) and
``metrics=`` (a table of :func:`metrics`), as paths or DataFrames.

Outputs: ids, run and measure names are plain strings (pandas' string columns, not
categoricals), so ``table[table.query_id == "151"]`` selects query 151.  Notices (queries
not evaluated, runs without results for some queries) are issued as
:class:`~prefeval.errors.PrefevalWarning` (``notify=`` may redirect them, e.g. to
``logging``, or ``None`` drops them); ``progress=True`` shows tqdm bars (``tqdm.auto``,
so widgets in Jupyter).  Bad input raises :class:`~prefeval.errors.InputError` (a
``ValueError``), ``ValueError`` or ``TypeError`` with a message saying what is wrong.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import warnings
from collections.abc import Callable

import pandas as pd

from .errors import PrefevalWarning

__all__ = ["compare", "metrics", "order", "discpower", "tau", "agree", "robustness"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str) -> None:
    """Issue a notice as a :class:`PrefevalWarning`, attributed to the first caller
    outside the prefeval package (the user's line)."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, PrefevalWarning, stacklevel=level)


Notify = Callable[[str], None] | None


# --------------------------------------------------------------------------- arguments


def _text_list(value, name: str) -> list[str]:
    """A str or an iterable of str as a list (None: empty)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        values = list(value)
    except TypeError:
        raise TypeError(f"{name}: expected a string or a list of strings") from None
    if not all(isinstance(v, str) for v in values):
        raise TypeError(f"{name}: expected a string or a list of strings")
    return values


def _choice(value, choices, name: str) -> str:
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


def _number(value, name: str, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
    """``value`` checked as the command's option type checks it."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name}={value!r}: expected {'an integer' if integer else 'a number'}")
    value = int(value) if integer else float(value)
    if not integer and not math.isfinite(value):
        raise ValueError(f"{name}={value!r}: not a finite number")
    if (lo is not None and (value <= lo if lo_open else value < lo)) or (
        hi is not None and (value >= hi if hi_open else value > hi)
    ):
        low = "" if lo is None else f"{lo} {'<' if lo_open else '<='} "
        high = "" if hi is None else f" {'<' if hi_open else '<='} {hi}"
        raise ValueError(f"{name}={value!r}: must be {low}{name}{high}")
    return value


def _engine_options(relevance_level, max_docs):
    from .cli import MAX_RANK

    if relevance_level is not None:
        relevance_level = _number(relevance_level, "relevance_level")
    if max_docs is not None:
        max_docs = min(_number(max_docs, "max_docs", lo=1, integer=True), MAX_RANK)
    return relevance_level, max_docs


def _list_of(value, kind, name: str) -> list:
    """A comma-separated string or an iterable of numbers (``queries``, ``labels``)."""
    if isinstance(value, str):
        try:
            value = [kind(x) for x in value.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"{name}={value!r}: expected comma-separated numbers") from None
    elif isinstance(value, numbers.Real):
        value = [value]
    values = [_number(v, name, integer=kind is int) for v in value]
    if not values:
        raise ValueError(f"{name}: empty list")
    return values


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical (and object) text columns as pandas' plain string columns."""
    for column in frame.columns:
        dtype = frame[column].dtype
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
            frame[column] = frame[column].astype(str)
    return frame


def _runs(runs):
    from .inputs import runs_input

    if runs is None:
        raise ValueError("runs: no run given")
    return runs_input(runs)


# --------------------------------------------------------------------------- commands


def compare(
    qrels,
    runs,
    *,
    measures=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    per_query: bool = False,
    summary: bool = True,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Preference of every pair of runs (``prefeval compare``): rows ``measure, run_a,
    run_b, query_id, value``; value > 0 prefers run_a (RPP: rpp-sigir2022 eq. 4-6;
    lexirecall eq. 11; lexiprecision).

    Pairs follow the order of ``runs``; without ``per_query`` only the summary rows
    (query_id ``"all"``, the mean over evaluated queries), with it per-query rows first;
    ``summary=False`` drops the summary rows (``-n``).  ``measures``: names or a comma
    list (default: all the qrels support).

    >>> import prefeval
    >>> prefs = prefeval.compare("sample_data/qrels.txt",
    ...                          ["sample_data/runs/input.sys01", "sample_data/runs/input.sys02"],
    ...                          measures="rpp,lexirecall", per_query=True)
    >>> prefs[prefs.query_id == "301"]  # doctest: +SKIP
    """
    from .engine import compute_cube, load_runs, relevant_with_notice
    from .inputs import qrels_input
    from .measures import parse_measures
    from .readers import read_qrels

    relevance_level, max_docs = _engine_options(relevance_level, max_docs)
    if not per_query and not summary:
        raise ValueError("summary=False without per_query=True leaves no rows")
    sources = _runs(runs)
    if len(sources) < 2:
        raise ValueError(
            "need at least two runs to compare (one DataFrame of several runs needs a "
            "'run' or 'name' column)"
        )
    judged = read_qrels(qrels_input(qrels))
    measure_list = parse_measures(_text_list(measures, "measures"), judged.has_subtopics)
    relevant = relevant_with_notice(judged, relevance_level, notify)
    positions = load_runs(sources, relevant, max_docs, notify=notify, progress=progress)
    cube = compute_cube(positions, relevant, measure_list, binary=binary, progress=progress)
    return _plain(cube.to_frame(per_query=per_query, summary=summary))


def metrics(
    qrels,
    runs,
    *,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Per-query baseline metrics (``prefeval metrics``): rows ``measure, run, query_id,
    value`` for every baseline, run and evaluated query.

    ``baselines``: ir-measures strings (``"AP"``, ``"nDCG@10"``, ...) or the native
    ``TSE``/``ASL``; default AP nDCG RR R@1000 Rprec (+ the intent-aware ones on
    subtopic qrels).  The result is a ``metrics=`` table for the analysis functions.

    >>> import prefeval
    >>> table = prefeval.metrics("sample_data/qrels.txt", "sample_data/runs/input.sys01",
    ...                          baselines=["AP", "nDCG@10"])
    >>> table.groupby("measure").value.mean()  # doctest: +SKIP
    """
    from .baselines import compute_metrics, default_baselines
    from .engine import relevant_with_notice
    from .inputs import qrels_input
    from .readers import read_qrels

    relevance_level, max_docs = _engine_options(relevance_level, max_docs)
    sources = _runs(runs)
    judged = read_qrels(qrels_input(qrels))
    relevant = relevant_with_notice(judged, relevance_level, notify)
    table = compute_metrics(
        judged,
        sources,
        _text_list(baselines, "baselines") or default_baselines(judged.has_subtopics),
        query_ids=relevant.query_ids,
        relevance_level=relevance_level,
        max_docs=max_docs,
        progress=progress,
    )
    return _plain(table)


def _gather(
    qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary, **kw
):
    """The evidence of an analysis function, with the command's checks of its inputs."""
    from .inputs import qrels_input
    from .pipeline import gather

    relevance_level, max_docs = _engine_options(relevance_level, max_docs)
    no_baselines = baselines is not None and not isinstance(baselines, str) and not baselines
    if no_baselines and metrics is not None:
        raise ValueError("metrics= and baselines=[] (no baselines) contradict each other")
    if prefs is not None:
        given = [
            name
            for name, value in (
                ("binary", binary),
                ("relevance_level", relevance_level is not None and qrels is None),
                ("max_docs", max_docs is not None),
            )
            if value
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} cannot change preferences read from prefs= (they were "
                "computed when the table was written)"
            )
    if runs is not None and qrels is None:
        raise ValueError("runs= needs qrels (to compute preferences or baselines)")
    sources = _runs(runs) if runs is not None else {}
    if prefs is None and (qrels is None or len(sources) < 2):
        raise ValueError("give qrels and at least two runs, or prefs=")
    return gather(
        qrels_input(qrels) if qrels is not None else None,
        sources,
        prefs=prefs,
        metrics=metrics,
        measures=_text_list(measures, "measures"),
        baselines=_text_list(baselines, "baselines"),
        no_baselines=no_baselines,
        relevance_level=relevance_level,
        max_docs=max_docs,
        binary=binary,
        **kw,
    )


def order(
    qrels=None,
    runs=None,
    *,
    prefs=None,
    metrics=None,
    measures=None,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    method: str = "mc4",
    teleport: float = 0.05,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """System orderings (``prefeval order``): rows ``measure, method, rank, run, score``,
    rank 1 best, tied scores sharing a rank.

    Per query the win rate W_q(a) = sum_b Delta(a, b) (rpp-sigir2022 eq. 7) ranks the
    runs; ``method`` ``mc4`` (teleport ``teleport``), ``borda``, ``winrate`` or
    ``copeland`` aggregates them.  Baselines (``baselines``, default set; ``[]`` for
    none; or ``metrics=`` a table) are ordered by their mean.  Preferences come from
    ``qrels, runs`` or ``prefs=`` (a per-query :func:`compare` table).

    >>> import prefeval, glob
    >>> prefeval.order("sample_data/qrels.txt", sorted(glob.glob("sample_data/runs/*")),
    ...                baselines=["AP"], method="borda")  # doctest: +SKIP
    """
    from .aggregation import METHODS
    from .aggregation import order as order_table

    _choice(method, METHODS, "method")
    _number(teleport, "teleport", lo=0, hi=1, lo_open=True)
    got = _gather(
        qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary,
        notify=notify, progress=progress,
    )  # fmt: skip
    return _plain(order_table(got.evidence, method=method, teleport=teleport))


def discpower(
    qrels=None,
    runs=None,
    *,
    prefs=None,
    metrics=None,
    measures=None,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    tests=None,
    correction: str = "bonferroni",
    alpha: float = 0.05,
    trials: int = 10000,
    seed: int = 0,
    pairs: bool = False,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Discriminative power (``prefeval discpower``, Sakai): rows ``measure, test,
    correction, alpha, significant, pairs, percent``; with ``pairs=True`` one row per run
    pair instead: ``measure, test, run_a, run_b, p_value, p_adjusted``.

    ``tests``: any of ``ttest``, ``sign``, ``hsd`` (randomized Tukey HSD, ``trials``,
    ``seed``; default all three); ``correction`` ``bonferroni``, ``holm`` or ``none``
    for the t and sign tests.  Inputs as :func:`order`.

    >>> import prefeval, glob
    >>> prefeval.discpower("sample_data/qrels.txt", sorted(glob.glob("sample_data/runs/*")),
    ...                    tests="sign", baselines=["AP"])  # doctest: +SKIP
    """
    from .statistics import CORRECTIONS, TESTS, discriminative_power, pair_tests

    tests = _text_list(tests, "tests") or list(TESTS)
    for test in tests:
        _choice(test, TESTS, "tests")
    _choice(correction, CORRECTIONS, "correction")
    _number(alpha, "alpha", lo=0, hi=1, lo_open=True, hi_open=True)
    _number(trials, "trials", lo=1, integer=True)
    _number(seed, "seed", lo=0, hi=2**63 - 1, integer=True)
    got = _gather(
        qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary,
        notify=notify, progress=progress,
    )  # fmt: skip
    table = pair_tests(got.evidence, tests, correction, trials, seed, progress=progress)
    return _plain(table if pairs else discriminative_power(table, alpha))


def tau(
    qrels=None,
    runs=None,
    *,
    prefs=None,
    metrics=None,
    measures=None,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    method: str = "mc4",
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Kendall's tau-b between the run orderings of every pair of measures (``prefeval
    tau``, rpp-sigir2022 Table 2): rows ``measure_a, measure_b, tau``.

    Preferences are ordered by ``method`` (as :func:`order`), baselines by their mean.

    >>> import prefeval, glob
    >>> prefeval.tau("sample_data/qrels.txt", sorted(glob.glob("sample_data/runs/*")),
    ...              measures="rpp", baselines=["AP", "nDCG"])  # doctest: +SKIP
    """
    from .aggregation import METHODS
    from .correlation import tau_table

    _choice(method, METHODS, "method")
    got = _gather(
        qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary,
        notify=notify, progress=progress,
    )  # fmt: skip
    return _plain(tau_table(got.evidence, method=method))


def agree(
    qrels=None,
    runs=None,
    *,
    prefs=None,
    metrics=None,
    measures=None,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    ties: bool = False,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Sign agreement of preferences with baseline differences (``prefeval agree``):
    rows ``measure, baseline, agreement, compared`` — among the (query, run pair)
    comparisons where the baseline differs, the share where the preference has the same
    sign.  ``ties=True``: rows ``measure, ties, comparisons`` instead.

    >>> import prefeval, glob
    >>> prefeval.agree("sample_data/qrels.txt", sorted(glob.glob("sample_data/runs/*")),
    ...                baselines=["AP"])  # doctest: +SKIP
    """
    from .correlation import agreement_table, ties_table

    got = _gather(
        qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary,
        notify=notify, progress=progress,
    )  # fmt: skip
    return _plain(ties_table(got.evidence) if ties else agreement_table(got.evidence))


def robustness(
    qrels=None,
    runs=None,
    *,
    prefs=None,
    metrics=None,
    measures=None,
    baselines=None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    binary: bool = False,
    queries=None,
    labels=None,
    policy: str = "uniform",
    samples: int = 10,
    seed: int = 0,
    progress: bool = False,
    notify: Notify = warn,
) -> pd.DataFrame:
    """Robustness to fewer queries or labels (``prefeval robustness``, rpp-sigir2022
    §6.2): rows ``measure, kind, level, samples, tau_mean, tau_std, ties, agreement``.

    ``queries``: numbers of queries to draw (``[5, 10]`` or ``"5,10"``); ``labels``:
    fractions of each query's relevant judgments to keep, removed ``uniform``-ly or
    most-retrieved first (``policy="pool"``); ``samples`` draws each, ``seed``.

    >>> import prefeval, glob
    >>> prefeval.robustness("sample_data/qrels.txt", sorted(glob.glob("sample_data/runs/*")),
    ...                     queries=[5, 10], samples=3, baselines=[])  # doctest: +SKIP
    """
    from .experiments import POLICIES
    from .experiments import robustness as run_robustness

    if queries is None and labels is None:
        raise ValueError("give queries= and/or labels=")
    sizes = _list_of(queries, int, "queries") if queries is not None else ()
    fractions = _list_of(labels, float, "labels") if labels is not None else ()
    _choice(policy, POLICIES, "policy")
    _number(samples, "samples", lo=1, hi=10**6, integer=True)
    _number(seed, "seed", lo=0, hi=2**63 - 1, integer=True)
    got = _gather(
        qrels, runs, prefs, metrics, measures, baselines, relevance_level, max_docs, binary,
        notify=notify, progress=progress,
    )  # fmt: skip
    table = run_robustness(
        got,
        queries=sizes,
        labels=fractions,
        samples=samples,
        seed=seed,
        policy=policy,
        progress=progress,
    )
    return _plain(table)
