"""The baselines' tables and matrices: :func:`compute_metrics`, :func:`metric_matrices`,
the rows ``metrics`` writes, and the summary of a metrics table."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.qrels import Qrels, check_level
from ...io.tables import MAX_METRIC_VALUE, metrics_from_table
from ...options import Options
from .evaluate import baseline_values, evaluated_queries
from .names import COLUMNS, GM_MAP, parse_all, parse_baseline


def compute_metrics(
    qrels,
    runs,
    baselines=None,
    *,
    query_ids: Sequence[str] | None = None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Baseline metric values per run and query: rows ``measure, run, query_id, value``.

    ``qrels``: a :class:`~prefeval.core.qrels.Qrels`, a path or a DataFrame; ``runs``: a
    :class:`~prefeval.io.runs.RunSet` (its runs read from the bytes it holds, or their
    columns kept by the engine), or what :func:`~prefeval.io.runs.resolve_runs` takes.
    ``baselines``: measure strings (see
    :func:`parse_baseline`); None means :func:`default_baselines`.

    There is one row for every (baseline, run, query of ``query_ids``), in that order.
    ``query_ids`` defaults to the queries prefeval evaluates
    (``qrels.relevant(relevance_level).query_ids``); run lines for other queries are
    ignored.  A query a run has no line for (or none left after ``max_docs``) gets each
    ir-measures measure's value on an empty ranking, as ``trec_eval -c`` evaluates it
    (:func:`_empty_ranking_values`): 0, except ``NumQ`` (1) and ``NumRel`` (the number of
    judged documents with grade >= rel, counted from the qrels at any rel:
    :func:`_num_rel`), the only measures of ir-measures' pytrec_eval and pyndeval
    providers with a non-zero value on an empty ranking.  The native TSE and ASL impute
    its relevant documents at the bottom of the corpus instead, and are NaN for a query
    with no relevant document.

    ``max_docs`` (trec_eval ``-M``) keeps each ranking's top K after sorting by score
    descending, docno descending; every metric, and the corpus sizes of the native ones,
    then see the runs as if their files held only those K lines per query.

    ``relevance_level`` L (prefeval's ``-l``: relevant means grade >= L) decides the
    evaluated queries and the native metrics' relevant documents, and is passed to every
    ir-measures measure that has a binary ``rel`` threshold the measure string did not set
    (``AP``, ``RR``, ``Rprec``, ``R@k``, ``P@k``, ``ERR_IA@k``, ...: ``AP`` is computed as
    ``AP(rel=L)`` but still reported as ``AP``).  An explicit ``rel`` wins (``AP(rel=1)``
    stays at 1).  Measures without such a threshold are unaffected: ``nDCG`` uses the
    grades as gains, and measures whose ``rel`` is optional with no default (``RBP``:
    graded; ``NumRet``: all documents) are left as written, except ``NumRelRet`` (trec_eval's
    ``num_rel_ret``, ir-measures' ``NumRet(rel=1)``) written without rel, which counts the
    retrieved documents with grade >= L as trec_eval does at ``-l L``.  ir-measures only
    accepts an integer rel, so a non-integer L raises ValueError when some measure needs
    it; L must be a finite number > 0 (:func:`prefeval.core.qrels.check_level`).

    ``notify`` (when given) is told, as ``compare`` tells it, of each run without results
    for some of the queries prefeval evaluates (:func:`~prefeval.core.positions.missing_notice`).
    """
    values, parsed, names, qlist = baseline_values(
        qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify
    )
    return _metrics_frame(values, parsed, names, qlist)


def metric_matrices(
    qrels,
    runs,
    baselines=None,
    *,
    query_ids: Sequence[str] | None = None,
    relevance_level: float | None = None,
    max_docs: int | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`compute_metrics`' values as :func:`prefeval.io.tables.metrics_from_table`
    reads them back from its table: measure -> (queries x runs) matrix, in the order of
    the runs and of ``query_ids``, without the table (at a million users, its rows of
    Python objects take gigabytes).  Values the table would refuse (NaN, infinities,
    none at all) go through it, for its error."""
    values, parsed, names, qlist = baseline_values(
        qrels, runs, baselines, query_ids, relevance_level, max_docs, progress, notify
    )
    # NaN fails both bounds; no temporary copy of values (gigabytes at a million users)
    if not values.size or not (
        -MAX_METRIC_VALUE <= values.min() <= values.max() <= MAX_METRIC_VALUE
    ):
        return metrics_from_table(
            _metrics_frame(values, parsed, names, qlist), names, qlist, "<metrics>"
        )
    return {b.name: values[i] for i, b in enumerate(parsed)}


def _metrics_frame(values, parsed, runs: list, qlist: list) -> pd.DataFrame:
    """The rows ``measure, run, query_id, value`` of ``values`` (baselines x queries x
    runs), baseline by baseline, run by run."""
    nb, nq, nr = values.shape
    b_idx = np.repeat(np.arange(nb), nr * nq)
    r_idx = np.tile(np.repeat(np.arange(nr), nq), nb)
    q_idx = np.tile(np.arange(nq), nb * nr)
    return pd.DataFrame(
        {
            "measure": np.array([b.name for b in parsed], dtype=object)[b_idx],
            "run": np.array(runs, dtype=object)[r_idx],
            "query_id": np.array(qlist, dtype=object)[q_idx],
            "value": values.transpose(0, 2, 1).reshape(-1),
        },
        columns=COLUMNS,
    )


def metrics_rows(
    qrels: Qrels,
    runs,
    baselines,
    options: Options | None = None,
    *,
    notify: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The table of ``prefeval metrics``: per-query rows (``per_query``) of the queries
    prefeval evaluates (those with a relevant document at the level, the rows the
    analysis commands read back with ``--metrics``), then the summary rows
    (``summary``), which average over *every judged query* as ``trec_eval -c`` does: a
    query with no relevant document at the level counts with its values (0 for AP,
    1 for NumQ, ...), a query a run did not answer with the empty ranking's.  The native
    TSE and ASL are undefined on a query with no relevant document and average over the
    others.  The settings are ``options``' ``relevance_level``, ``max_docs``,
    ``per_query``, ``summary`` and ``progress``."""
    return pd.concat(
        list(metrics_frames(qrels, runs, baselines, options, notify=notify)), ignore_index=True
    )


def metrics_frames(
    qrels: Qrels,
    runs,
    baselines,
    options: Options | None = None,
    *,
    notify: Callable[[str], None] | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`metrics_rows`' table in pieces, one (measure, run) of per-query rows at a
    time, then the summary rows: the command writes them as they come, never the whole
    table (at a million users its rows of Python objects take gigabytes).  The values
    are computed, and every error raised, before the first piece."""
    options = options or Options()
    relevance_level, max_docs = check_level(options.relevance_level), options.max_docs
    per_query, summary, progress = options.per_query, options.summary, options.progress
    judged = qrels.query_ids()
    if not judged:
        raise InputError(qrels.name, None, "no query is judged")
    # the relevant set's queries, read off the judgments (the set itself, large at
    # recommender scale, is not needed)
    evaluated = evaluated_queries(qrels, qrels.general(), relevance_level, None)
    dropped = len(judged) - len(evaluated)
    what = "grade > 0" if relevance_level is None else f"grade >= {relevance_level:g}"
    if notify is not None and not evaluated:
        notify(f"no query in {qrels.name} has a relevant document ({what})")
    elif notify is not None and dropped and per_query:
        natives = [b.name for b in parse_all(baselines) if b.kind == "native"]
        counted = "summary rows count them, as trec_eval -c"
        if natives:  # undefined without a relevant document: averaged where defined
            counted = (
                f"summary rows count them, as trec_eval -c, except those of "
                f"{', '.join(natives)}, undefined there, which average the other queries"
            )
        notify(
            f"{dropped} of {len(judged)} queries "
            f"in {qrels.name} have no relevant document ({what}): no per-query rows (the "
            f"{counted})"
        )
    values, parsed, names, qlist = baseline_values(
        qrels, runs, baselines, judged, relevance_level, max_docs, progress, notify
    )
    return _metrics_pieces(values, parsed, names, qlist, evaluated, per_query, summary)


def _metrics_pieces(values, parsed, runs, qlist, evaluated, per_query: bool, summary: bool):
    """The pieces of :func:`metrics_frames` from ``values`` (baselines x queries ``qlist``
    x runs): each (baseline, run)'s rows on the ``evaluated`` queries, then the summary
    rows, each summed as the whole table's group (:func:`metrics_summary`)."""
    queries = np.asarray(qlist, dtype=object)
    chosen = pd.Index(queries).isin(list(evaluated))
    sums = []
    if not per_query and not summary or not len(parsed) or not len(runs):
        yield _no_rows()
    for b, baseline in enumerate(parsed):
        for r, run in enumerate(runs):
            whole = pd.DataFrame(
                {"measure": baseline.name, "run": run, "query_id": queries,
                 "value": values[b, :, r]},
                columns=COLUMNS,
            )  # fmt: skip
            if summary:
                sums.append(metrics_summary(whole))
            if per_query:
                yield whole[chosen].reset_index(drop=True)
    if summary:
        yield pd.concat(sums, ignore_index=True) if sums else metrics_summary(_no_rows())


def _no_rows() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float if c == "value" else object) for c in COLUMNS})


def no_metrics() -> pd.DataFrame:
    """The table of :func:`metrics_rows` without rows (``metrics -m runid``)."""
    return pd.DataFrame(
        {c: pd.Series(dtype=float if c == "value" else str) for c in COLUMNS}, columns=COLUMNS
    )


def count_measure(name: str) -> bool:
    """Whether the baseline ``name`` counts (ir-measures' ``NumQ``, ``NumRel``, ``NumRet``,
    ``NumRelRet``, whose aggregator sums): its values are integers, its summary a sum."""
    from ir_measures.measures.base import SumAgg

    baseline = parse_baseline(name)
    return baseline.kind == "irm" and isinstance(baseline.measure.aggregator(), SumAgg)


def metrics_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Summary rows ``measure, run, 'all', value`` of a :func:`compute_metrics` table, one
    per (measure, run) in the table's order, as trec_eval prints them: the mean over the
    queries with a value, except that ir-measures' count measures (``NumQ``, ``NumRel``,
    ``NumRet``, ``NumRelRet``, whose aggregator sums) are summed and ``gm_map`` is ``exp``
    of the mean (its per-query values are logarithms: the geometric mean)."""
    summed = {name: count_measure(str(name)) for name in table["measure"].unique()}
    groups = table.groupby(["measure", "run"], sort=False)["value"]
    means, sums = groups.mean(), groups.sum()  # NaN (no value) skipped
    keys = means.index
    use_sum = np.array([summed[m] for m in keys.get_level_values(0)], dtype=bool)
    value = np.where(use_sum, sums.to_numpy(dtype=float), means.to_numpy(dtype=float))
    geometric = keys.get_level_values(0).to_numpy(dtype=object) == GM_MAP
    value[geometric] = np.exp(value[geometric])
    return pd.DataFrame(
        {
            "measure": keys.get_level_values(0).to_numpy(dtype=object),
            "run": keys.get_level_values(1).to_numpy(dtype=object),
            "query_id": "all",
            "value": value,
        },
        columns=COLUMNS,
    )
