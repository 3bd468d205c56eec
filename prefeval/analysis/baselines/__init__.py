"""Baseline (per-run) metrics next to the preferences: ir-measures plus two native metrics.

Any `ir-measures <https://ir-measur.es>`_ measure string works (``AP``, ``nDCG@10``,
``RR``, ``R@1000``, ``Rprec``, ``P@10``, ``ERR_IA@20``, ``alpha_nDCG@20``, ...).  Two
metrics of the papers that ir-measures lacks are computed here from rank positions:

``TSE``
    total search efficiency (lexirecall, eq. 3): the exposure ``e(p_m)`` of the *last*
    relevant document.  ``TSE`` uses ``e(k) = 1/log2(1+k)``, ``TSE(exposure=rr)``
    ``e(k) = 1/k`` and ``TSE(exposure=rbp,gamma=0.5)`` ``e(k) = gamma^(k-1)`` (gamma
    defaults to 0.5).  Higher is better.
``ASL``
    average search length (rpp-sigir2022, eq. 1 and section 5.5): the mean rank of the
    relevant documents.  Smaller is better.

and one of trec_eval that ir-measures lacks, computed from ir-measures' ``AP``:

``gm_map``
    geometric mean average precision (trec_eval's ``gm_map``, m_gm_map.c): per query
    ``log(max(AP, 0.00001))``, the value trec_eval (and pytrec_eval) computes per query
    and trec_eval -q does not print; the summary is ``exp`` of their mean, the geometric
    mean of AP with AP floored at ``MIN_GEO_MEAN`` = 0.00001.  The mean of the per-query
    values orders runs as the geometric mean does, so the analyses take it as they are.

TSE and ASL use pessimistic imputation: the ``u`` relevant documents a run did not retrieve take
positions ``n-u+1 .. n`` at the bottom of a corpus of ``n`` documents, where ``n`` is, per
query, the number of distinct documents in all the runs evaluated together (after
``max_docs``) and the relevant documents: "the number of unique items in union of all
rankings and the relevant items" (rpp-sigir2022 section 5.5, for ASL; the lexirecall paper
fixes no n, and TSE takes the same).  Judged non-relevant documents no run retrieved are not
counted.  A run that retrieved nothing for a query therefore still gets a (poor) value,
not 0.  Relevance is prefeval's: general grade
(maximum over subtopics) ``>= relevance_level``, or ``> 0`` without a level.

Which qrels an ir-measures measure sees
---------------------------------------
Standard measures get the general qrels, one row per judged document with the maximum
grade over its rows (:meth:`prefeval.core.qrels.Qrels.general`).  Intent-aware measures (those
ir-measures evaluates with ndeval: ``*_IA``, ``alpha_(n)DCG``, ``StRecall``, ``(n)NRBP``)
get the subtopic rows with the subtopic id as ``iteration``.  Subtopic rows are never fed
to a trec_eval measure: pytrec_eval keys judgments by (query, document), so one subtopic's
row would silently overwrite another's.

Runs are read with prefeval's fast reader, restricted to the evaluated queries, sorted as
trec_eval sorts them (score descending, docno descending) and cut at ``max_docs``; each
run is then handed to evaluators built once for all runs, as a dict of dicts (trec_eval
measures) or an iterator of ``ScoredDoc`` (ndeval), the formats those providers consume
without ir-measures' row-by-row DataFrame conversion.

Per-query slices of a run are always taken by query, whatever order its file lists the
queries in (query blocks in any order, lines shuffled).

Ties: trec_eval (pytrec_eval) ranks equal scores by docno descending, as prefeval does
(preferences, TSE, ASL).  pyndeval re-sorts every ranking by score and breaks ties by
docno *ascending*; the intent-aware values follow it, so they equal ir-measures' own
(only the ``max_docs`` cut itself is made in trec order).

A query a run did not answer is evaluated as ``trec_eval -c`` does, on an empty ranking:
see :func:`_empty_ranking_values`.
"""

from __future__ import annotations

from .names import (
    DEFAULT_BASELINES,
    DEFAULT_SUBTOPIC_BASELINES,
    GM_MAP,
    NATIVE_BASELINES,
    Baseline,
    default_baselines,
    higher_is_better,
    is_measure,
    parse_baseline,
    parse_baselines,
    without_runid,
)
from .tables import (
    compute_metrics,
    count_measure,
    metric_matrices,
    metrics_frames,
    metrics_rows,
    metrics_summary,
    no_metrics,
)

__all__ = [
    "DEFAULT_BASELINES",
    "DEFAULT_SUBTOPIC_BASELINES",
    "GM_MAP",
    "NATIVE_BASELINES",
    "Baseline",
    "compute_metrics",
    "count_measure",
    "default_baselines",
    "higher_is_better",
    "is_measure",
    "metric_matrices",
    "metrics_rows",
    "metrics_frames",
    "metrics_summary",
    "no_metrics",
    "parse_baseline",
    "parse_baselines",
    "without_runid",
]
